#!/bin/bash
# The verifier of a Harbor task made by repo2env: Harbor copies the task's tests/ to /tests and runs
# this file as root, in the verifier's own pristine container, once the agent is done. verify.py
# beside it grades the agent's diff (the trial's artifact) with the hidden tests through the grading
# script repo2env's grader runs (grade.sh, restore.py), and writes /logs/verifier/reward.txt and reward.json.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt  # until verify.py says otherwise: a verifier that dies scores 0
exec /usr/bin/python3 -I -S "$(dirname "$0")/verify.py" "$@"
