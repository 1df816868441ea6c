# The grading script: runs inside a fresh sandbox of the task's image as the agent's user, in one
# exec, with one argument: the settings file (grade.json) that repo2env.verify.grader writes beside
# it; a Harbor task's tests/test.sh runs this same file. Steps:
# 1. apply the (filtered) agent patch, agent.diff in the settings' "inputs" folder (exit 90 when it
#    does not apply);
# 2. restore.py (beside this file): revert what the patch may not change, apply the hidden tests and
#    place the canaries (exit 91: the hidden tests do not apply; 92: the patch reaches into the runner);
# 3. run exactly the settings' test ids with the snapshot's pytest configuration named explicitly,
#    under a timeout, writing JUnit XML to the settings' path, the outcome plugin streaming to a FIFO;
# 4. stop every process the tests left, then print the output's tail, the XML and a trailer
#    ("REPO2ENV-GRADE-TRAILER <pytest status> <XML bytes, -1: none>") that the reader trusts only
#    when this script ran to its end.
# Nothing here may come from the agent: the settings, this file and restore.py are root's, read-only.
set -u
settings=$1
here=$(dirname "$0")
# The settings as shell variables, read by the system's Python before anything of the patch exists
# (-I -S: no site, no .pth, no working directory on sys.path). Lists become arrays: test ids hold
# spaces, brackets, quotes and backslashes, and are passed one argument each.
read_settings='import json, shlex, sys
sys.stdout.reconfigure(errors="surrogateescape")  # a patch path or an id may be any bytes
settings = json.load(open(sys.argv[1], encoding="utf-8"))
for name in ("inputs", "private", "junit", "timeout_s", "test_cmd", "python_path", "plugin", "fifo"):
    print(name + "=" + shlex.quote(str(settings[name])))
print("script_runner=" + shlex.quote(str(settings.get("script_runner", ""))))
for name in ("test_ids", "config_dirs", "config_names", "config_sections", "run_options", "report_options", "reports"):
    print(name + "=(" + " ".join(shlex.quote(item) for item in settings.get(name, [])) + ")")'
assignments=$(/usr/bin/python3 -I -S -c "$read_settings" "$settings") || exit 93
eval "$assignments"
cd /testbed
export PYTHONDONTWRITEBYTECODE=1 PYTEST_ADDOPTS= PYTHONPATH="$python_path"
# The outcome plugin by name, not with -p: `-p` makes pytest look the name up among the installed
# entry points too, through the pluggy of the environment, which may be the project under test at
# an old commit without that API (pytest-dev/pluggy).
export PYTEST_PLUGINS="$plugin"
# The outcome collector waits for a writer: when pytest never opens its FIFO, this script's end does.
trap '[ -p "$fifo" ] && timeout 2 sh -c ": > \"\$0\"" "$fifo"' EXIT
if [ -s "$inputs/agent.diff" ]; then
  git apply --whitespace=nowarn --binary "$inputs/agent.diff" || exit 90
fi
/usr/bin/python3 -I -S "$here/restore.py" "$settings"
restored=$?
case $restored in 0) ;; 91|92) exit $restored;; *) exit 90;; esac
tries=0
while [ ! -p "$fifo" ] && [ $tries -lt 1000 ]; do sleep 0.01; tries=$((tries + 1)); done
# The snapshot's configuration, named explicitly (-c): a file the patch adds is never chosen,
# whatever name a pytest version looks for. The settings list the runner's files in its own search
# order, each with the line that makes it count (config_sections: a grep -E pattern, '' for any
# such file), and the folders nearest to the tests first. The rootdir stays /testbed (run_options),
# where the test ids are relative to.
config=()
for dir in "${config_dirs[@]}"; do
  for index in "${!config_names[@]}"; do
    file=$dir/${config_names[$index]}
    section=${config_sections[$index]}
    [ -f "$file" ] || continue
    if [ -n "$section" ]; then grep -Eq -- "$section" "$file" || continue; fi
    config=(-c "$file")
    break 2
  done
done
output=$junit.out
if [ -n "$script_runner" ]; then
  # A runner of another language (script_runner names it): test_cmd is the profile's whole plan
  # (one sh -c program that runs exactly the ids and writes the settings' reports, see
  # repo2env.languages.javascript.runners.plan_run); its reports become the one report below.
  timeout -k 5 "$timeout_s" /bin/sh -c "$test_cmd" >"$output" 2>&1 </dev/null
  status=$?
else
# test_cmd is shell words (an override's command line; the launcher's quoted -c program): eval
# parses it as a shell would; every other argument is passed as it is.
eval "timeout -k 5 $timeout_s $test_cmd"' "${run_options[@]}" "${config[@]}" "${report_options[@]}" "${test_ids[@]}"' \
  >"$output" 2>&1 </dev/null
status=$?
fi
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
