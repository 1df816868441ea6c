"""``python -m repo2env`` = the ``repo2env`` command."""

from repo2env.cli import main

main()
