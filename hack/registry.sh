# Sourced by the image scripts: a work folder and an in-memory registry on
# loopback (crane edits image configs only in a registry), both removed on
# exit. Needs $crane; sets $work, $registry_pid and $port.
work=$(mktemp -d)
registry_pid=
cleanup() {
  [ -z "$registry_pid" ] || kill "$registry_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
"$crane" registry serve --address 127.0.0.1:0 2> "$work/registry.log" &
registry_pid=$!
port=
for _ in $(seq 50); do
  port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$work/registry.log")
  [ -z "$port" ] || break
  sleep 0.1
done
[ -n "$port" ] || { cat "$work/registry.log" >&2; exit 1; }
