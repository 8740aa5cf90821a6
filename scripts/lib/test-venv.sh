# Sourced: make .venv hold the Python test dependencies pinned with their hashes
# (scripts/requirements-test.txt, resolved from scripts/requirements-test.in by
# `pip-compile --generate-hashes --allow-unsafe --strip-extras`). Installs again only
# when the pins change.
[ -x .venv/bin/python ] || python3 -m venv .venv
_stamp=.venv/.requirements-test.sha256
_want=$(sha256sum scripts/requirements-test.txt | cut -d' ' -f1)
if [ "$(cat "$_stamp" 2>/dev/null)" != "$_want" ]; then
  .venv/bin/python -m pip install -q --require-hashes -r scripts/requirements-test.txt
  echo "$_want" >"$_stamp"
fi
unset _stamp _want
