#!/usr/bin/env bash
# Usage: scripts/check-banned.sh [FILE...]
#
# Fails (exit 1) when a project C source calls a banned function, listing
# file:line: name for each call. With no FILE it checks every tracked *.c and
# *.h (git ls-files) except generated code (proto/ output, vmlinux.h).
# Comments and string/character literals are ignored; a call is the name
# followed by '(' (a member such as s->atoi(...) is not one).
#
# The list follows curl's checksrc: each has a bounded or reentrant stand-in.
#   strcpy strcat strncat strncpy sprintf vsprintf gets
#       -> snprintf, memcpy with a known length, lc_test_appendf (tests)
#   strtok                              -> strtok_r
#   atoi atol atoll atof                -> strtol/strtoll/strtod, checking errno and end
#   tmpnam tempnam mktemp               -> mkstemp, mkdtemp
#   gmtime localtime ctime asctime      -> gmtime_r, localtime_r, strftime
set -euo pipefail

BANNED=(strcpy strcat strncat strncpy sprintf vsprintf gets strtok
        atoi atol atoll atof tmpnam tempnam mktemp
        gmtime localtime ctime asctime)

case "${1:-}" in
-h | --help)
    sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
esac

cd "$(git rev-parse --show-toplevel)"
if [ $# -gt 0 ]; then
    files=("$@")
else
    # Generated code is never tracked today; the filter keeps it out if it is.
    mapfile -t files < <(git ls-files -- '*.c' '*.h' | grep -Ev '\.pb-c\.[ch]$|(^|/)vmlinux\.h$')
fi
[ ${#files[@]} -gt 0 ] || exit 0

names=$(IFS='|'; echo "${BANNED[*]}")
# One perl pass: blank out comments and literals (keeping newlines, so line
# numbers hold), then report each banned name called as a function.
found=$(BANNED_RE="$names" perl -e '
    my $re = qr/(?<![\w.])(?<!->)($ENV{BANNED_RE})\s*\(/;
    my $bad = 0;
    for my $f (@ARGV) {
        open(my $fh, "<", $f) or die "check-banned: $f: $!\n";
        local $/; my $s = <$fh>; close $fh;
        $s =~ s{ (/\*.*?\*/) | (//[^\n]*) | ("(?:\\.|[^"\\\n])*") | (\x27(?:\\.|[^\x27\\\n])*\x27) }{
            my $m = $&; $m =~ s/[^\n]/ /g; $m }gsxe;
        my $line = 1;
        for my $l (split /\n/, $s, -1) {
            while ($l =~ /$re/g) { print "$f:$line: $1\n"; $bad = 1; }
            $line++;
        }
    }
' "${files[@]}")

if [ -n "$found" ]; then
    printf '%s\n' "$found"
    n=$(printf '%s\n' "$found" | wc -l)
    echo "check-banned: $n call(s) to banned functions (see scripts/check-banned.sh for the safe stand-ins)" >&2
    exit 1
fi
