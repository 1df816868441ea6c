"""Real agent harnesses as policies: a harness (mini-swe-agent, OpenCode, any CLI) works on a task in
its sandbox while the capturing proxy between it and the model records every call (token ids and
log-probabilities included); the hidden verifier grades the sandbox's diff. See ``docs/harness.md``."""
