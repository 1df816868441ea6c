"""The agent's side of an environment: the tool set (bash, file edits, visible tests) over a sandbox."""
