# One run of the tests, the same for grading (grade.sh sources this file) and for derivation
# (repo2env.validate.derive sources it too): what runs is the settings', written by the host from
# the task's grading specification (repo2env.verify.spec: TestRunner). Sourced by bash; defines:
#
#   read_settings FILE   every entry of the settings file (JSON) as a shell variable: a string as a
#                        string, a list as an array (test ids hold spaces, brackets, quotes and
#                        backslashes, and are passed one argument each). The file is read by the
#                        system's Python with -I -S (no site, no .pth, no working directory on
#                        sys.path): nothing of the working tree runs.
#   read_settings FILE ASSIGNMENTS
#                        the same from ASSIGNMENTS, when it is a file: the shell assignments the
#                        host wrote (repo2env.verify.spec.shell_assignments), sourced, one
#                        interpreter start less. Only a caller that names the file reads it
#                        (grade.sh, for its root-owned inputs folder); derivation never does.
#   run_tests OUTPUT     runs the settings' test command in the current folder under the timeout,
#                        with the snapshot's configuration named explicitly, output (and errors)
#                        to OUTPUT; returns the command's status.
#
# Settings it reads: test_cmd (shell words), timeout_s, run_options, config_dirs, config_names,
# config_sections, report_options, test_ids.
read_settings() {
  local program='import json, shlex, sys
sys.stdout.reconfigure(errors="surrogateescape")  # a patch path or an id may be any bytes
for name, value in json.load(open(sys.argv[1], encoding="utf-8")).items():
    if not name.isidentifier():
        continue
    if isinstance(value, list):
        print(name + "=(" + " ".join(shlex.quote(str(item)) for item in value) + ")")
    elif isinstance(value, (str, int, float)):
        print(name + "=" + shlex.quote(str(value)))'
  local assignments
  if [ -n "${2:-}" ] && [ -f "$2" ] && [ ! -L "$2" ]; then
    . "$2" || return 1
    return 0
  fi
  assignments=$(/usr/bin/python3 -I -S -c "$program" "$1") || return 1
  eval "$assignments"
}

# The snapshot's configuration, named explicitly (-c): a file the patch adds is never chosen,
# whatever name a pytest version looks for. The settings list the runner's files in its own search
# order, each with the line that makes it count (config_sections: a grep -E pattern, '' for any
# such file), and the folders nearest to the tests first; the first match is pytest's own choice.
pick_config() {
  config=()
  local dir index file section
  for dir in "${config_dirs[@]}"; do
    for index in "${!config_names[@]}"; do
      file=$dir/${config_names[$index]}
      section=${config_sections[$index]}
      [ -f "$file" ] || continue
      if [ -n "$section" ]; then grep -Eq -- "$section" "$file" || continue; fi
      config=(-c "$file")
      return 0
    done
  done
}

run_tests() {
  pick_config
  # test_cmd is shell words (an override's command line): eval parses it as a shell would; every
  # other argument is passed as it is.
  eval "timeout -k 5 $timeout_s $test_cmd"' "${run_options[@]}" "${config[@]}" "${report_options[@]}" "${test_ids[@]}"' \
    >"$1" 2>&1 </dev/null
}
