#!/usr/bin/env bash
# Builds the Debian packages with CPack from BUILD (already built) and checks them as an operator
# would use them:
#   - the package holds the daemon, kctl, the unit, the sysusers entry and the settings file;
#   - installed with `dpkg -i` (as root, when KD_PACKAGE_INSTALL=1 or CI=true, and kerneld is
#     not already installed here), its daemon starts as the kerneld user the package created,
#     `kctl status` answers, SIGTERM stops it cleanly, and the packages are purged again;
#   - otherwise the package is unpacked into a temporary root (dpkg-deb -x) and the same daemon
#     run from there: the contents are checked, the maintainer scripts are not.
# The last line says which of the two ran.
#   scripts/package-test.sh [BUILD]
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$build"
# The package installs under /usr (its settings under /etc): only the install paths change, so
# this re-configure rebuilds nothing.
cmake -DCMAKE_INSTALL_PREFIX=/usr . > /dev/null
rm -f kerneld_*.deb kerneld-dev_*.deb
cpack -G DEB > cpack.log 2>&1 || { cat cpack.log; exit 1; }
deb=$(ls kerneld_*_*.deb)
dev=$(ls kerneld-dev_*_*.deb)

fail=0
contents=$(dpkg-deb --contents "$deb")
for path in ./usr/bin/kerneld ./usr/bin/kctl ./usr/lib/systemd/system/kerneld.service \
            ./usr/lib/sysusers.d/kerneld.conf ./etc/default/kerneld \
            ./usr/share/doc/kerneld/README.md; do
  grep -q " $path\$" <<< "$contents" || { echo "package-test: $deb lacks $path"; fail=1; }
done
# (Whole outputs into variables: grep -q on a pipe would cut dpkg-deb off with SIGPIPE.)
unit=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/lib/systemd/system/kerneld.service)
grep -q "^Type=notify" <<< "$unit" || { echo "package-test: the unit is not Type=notify"; fail=1; }
dev_contents=$(dpkg-deb --contents "$dev")
grep -q "/usr/include/kerneld/client/client.h" <<< "$dev_contents" \
  || { echo "package-test: $dev lacks the client headers"; fail=1; }
[ "$(dpkg-deb -I "$deb" conffiles)" = "/etc/default/kerneld" ] \
  || { echo "package-test: /etc/default/kerneld is not a conffile"; fail=1; }
[ $fail = 0 ] || exit 1

dir=$(mktemp -d /tmp/kd_pkg.XXXXXX)
chmod 755 "$dir"
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2> /dev/null && wait "$pid" 2> /dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

mode=unpacked
if [ "$(id -u)" = 0 ] && { [ "${KD_PACKAGE_INSTALL:-}" = 1 ] || [ "${CI:-}" = true ]; } \
   && ! dpkg -s kerneld > /dev/null 2>&1; then
  mode=installed
fi

if [ $mode = installed ]; then
  dpkg -i "$deb" "$dev" > "$dir/dpkg.log" 2>&1 || { cat "$dir/dpkg.log"; exit 1; }
  getent passwd kerneld > /dev/null || { echo "package-test: postinst created no kerneld user"; fail=1; }
  if command -v systemd-analyze > /dev/null; then
    systemd-analyze verify /usr/lib/systemd/system/kerneld.service \
      || { echo "package-test: systemd-analyze verify failed"; fail=1; }
  fi
  chown kerneld:kerneld "$dir"
  kerneld=/usr/bin/kerneld kctl=/usr/bin/kctl
  # setpriv execs the daemon itself (runuser would stay as its parent and take the signal).
  run_as=(setpriv --reuid=kerneld --regid=kerneld --init-groups)
else
  dpkg-deb -x "$deb" "$dir/root"
  kerneld=$dir/root/usr/bin/kerneld kctl=$dir/root/usr/bin/kctl
  run_as=()
fi

"$kerneld" --version | grep -q "^kerneld " || { echo "package-test: kerneld --version"; fail=1; }
"${run_as[@]}" "$kerneld" --socket="$dir/kerneld.sock" --admin_socket="$dir/admin.sock" \
  --metrics_address= --backend=cpu > "$dir/kerneld.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$dir/admin.sock" ] && break; sleep 0.1; done
"${run_as[@]}" "$kctl" --admin_socket="$dir/admin.sock" status > "$dir/status.out" 2>&1 \
  || { echo "package-test: kctl status failed"; cat "$dir/status.out"; fail=1; }
grep -q "cpu" "$dir/status.out" || { echo "package-test: kctl status shows no cpu backend"; fail=1; }
kill -TERM "$pid"
code=0; wait "$pid" || code=$?
pid=
[ $code = 0 ] || { echo "package-test: kerneld exited $code on SIGTERM"; fail=1; }
[ $fail = 0 ] || { echo "--- kerneld.log"; cat "$dir/kerneld.log"; }

if [ $mode = installed ]; then
  dpkg -P kerneld-dev kerneld > "$dir/dpkg.log" 2>&1 || { cat "$dir/dpkg.log"; fail=1; }
  [ ! -e /usr/bin/kerneld ] || { echo "package-test: purge left /usr/bin/kerneld"; fail=1; }
fi
[ $fail = 0 ] || exit 1
echo "package-test: $deb and $dev built and checked ($mode: $(
  [ $mode = installed ] && echo 'dpkg -i, daemon started as kerneld, kctl status, dpkg -P' \
                        || echo 'dpkg-deb -x into a temporary root, daemon started, kctl status'))"
