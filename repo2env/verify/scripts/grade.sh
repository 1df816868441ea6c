# The grading script: runs inside a fresh sandbox of the task's image as the agent's user, in one
# exec, with one argument: the settings file (grade.json) that repo2env.verify.grader writes beside
# it; a Harbor task's tests/test.sh runs this same file. Steps:
# 1. apply the (filtered) agent patch, agent.diff in the settings' "inputs" folder (exit 90 when it
#    does not apply);
# 2. restore.py (beside this file): revert what the patch may not change, apply the hidden tests and
#    place the canaries (exit 91: the hidden tests do not apply; 92: the patch reaches into the runner);
# 3. run exactly the settings' test ids as run_tests.sh (beside this file, shared with derivation)
#    runs them: the snapshot's pytest configuration named explicitly, under a timeout, JUnit XML to
#    the settings' path; the outcome plugin streams to a FIFO (a language runner's settings, with
#    script_runner, run its plan instead and return its reports in place of the XML);
# 4. stop every process the tests left, then print the output's tail, the XML and a trailer
#    ("REPO2ENV-GRADE-TRAILER <pytest status> <XML bytes, -1: none>") that the reader trusts only
#    when this script ran to its end.
# Nothing here may come from the agent: the settings, this file, run_tests.sh and restore.py are
# root's, read-only.
set -u
settings=$1
here=$(dirname "$0")
# shellcheck source=run_tests.sh
. "$here/run_tests.sh"
# A language runner's settings (see below) name it and its reports; pytest's have neither.
script_runner='' reports=()
# grade.json.sh beside it: the same settings as shell assignments, written by the grader (a Harbor
# verifier lays out none, and grade.json is read).
read_settings "$settings" "$settings.sh" || exit 93
cd /testbed
# The outcome plugin by name, not with -p: `-p` makes pytest look the name up among the installed
# entry points too, through the pluggy of the environment, which may be the project under test at
# an old commit without that API (pytest-dev/pluggy). The plugin takes its name and its folder out
# of both variables once loaded: nothing the tests start sees them. Options only the environment
# could add (PYTEST_ADDOPTS) are not taken; derivation runs without them too.
unset PYTEST_ADDOPTS
export PYTHONPATH="$python_path${PYTHONPATH:+:$PYTHONPATH}" PYTEST_PLUGINS="$plugin${PYTEST_PLUGINS:+,$PYTEST_PLUGINS}"
# The outcome collector waits for a writer: when pytest never opens its FIFO, this script's end does.
# Silently: the collector may have taken the FIFO away meanwhile (the open would then try to create
# a file in root's folder), and nothing may follow the trailer.
trap '[ -p "$fifo" ] && timeout 2 sh -c ": > \"\$0\"" "$fifo" 2>/dev/null' EXIT
if [ -s "$inputs/agent.diff" ]; then
  git apply --whitespace=nowarn --binary "$inputs/agent.diff" || exit 90
fi
/usr/bin/python3 -I -S "$here/restore.py" "$settings"
restored=$?
case $restored in 0) ;; 91|92) exit $restored;; *) exit 90;; esac
# The collector makes the FIFO as soon as its exec starts, which a loaded engine may be slow to do:
# the same 60 s of patience as the collector's and the launcher's own waits.
tries=0
while [ ! -p "$fifo" ] && [ $tries -lt 6000 ]; do sleep 0.01; tries=$((tries + 1)); done
output=$junit.out
# A language runner's test_cmd (script_runner names it) is its profile's whole plan, one sh -c
# program that runs exactly the ids and writes the settings' reports (see
# repo2env.languages.javascript.runners.plan_run), with no other argument; its reports become the
# one report below.
run_tests "$output"
status=$?
# Nothing the tests started may outlive them and touch the report or this script's output: stop
# every other process of this user at once (kill -1 cannot race a fork), kill all of them but this
# shell's ancestors (the exec's wrappers, which must see this script end well: the grader trusts
# the trailer only then), and let the ancestors go on. Builtins only: a fork bomb may have used up
# the pids. Then print the output's tail, the report and, last, the trailer.
kill -STOP -1 2>/dev/null
spare=" $$ " pid=$PPID
while [ "$pid" -gt 0 ] && read -r stat </proc/$pid/stat; do spare+="$pid "; stat=${stat##*) }; set -- $stat; pid=$2; done
for dir in /proc/[0-9]*; do case "$spare" in *" ${dir#/proc/} "*) ;; *) kill -9 "${dir#/proc/}" 2>/dev/null;; esac; done
for pid in $spare; do kill -CONT "$pid" 2>/dev/null; done
tail -c 200000 "$output"
if [ -n "$script_runner" ]; then
  # Every process of the tests is dead by now: the reports are what they left. One line per report
  # the plan names, its text in base64 ("-" when it was not written), as the one report read back.
  rm -f "$junit"
  for report in "${reports[@]}"; do
    if [ -f "$report" ] && [ ! -L "$report" ]; then
      printf 'REPO2ENV-REPORT %s %s\n' "$(printf %s "$report" | base64 -w0)" "$(base64 -w0 <"$report")" >>"$junit"
    else
      printf 'REPO2ENV-REPORT %s -\n' "$(printf %s "$report" | base64 -w0)" >>"$junit"
    fi
  done
fi
if [ -f "$junit" ]; then size=$(stat -c %s "$junit"); cat "$junit"; else size=-1; fi
printf '\nREPO2ENV-GRADE-TRAILER %03d %012d\n' "$status" "$size"
