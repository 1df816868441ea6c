"""The hidden verifier: grade an agent's patch with the PR's tests, which never enter its sandbox."""
