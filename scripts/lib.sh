# scripts/lib.sh: shell helpers sourced by the launchers and A/B scripts of scripts/ (after they
# cd to the repository root: `. scripts/lib.sh`), so that their flag checks and the report of
# missing inputs read the same everywhere.
#
#   die MSG...                  one line "error: MSG" on stderr, exit 1
#   warn MSG...                 one line "warning: MSG" on stderr
#   need_value FLAG NARGS       die unless the flag has a value after it (NARGS: the caller's $#)
#   is_uint FLAG VALUE ...      die unless each VALUE is a non-negative integer without leading
#                               zeros (bash arithmetic and printf %d read 010 as octal 8)
#   report_missing dry|run ITEM...
#                               one line per missing input: a dry run only warns (it prints the
#                               commands a real run would execute), a real run stops with exit 1

die() { echo "error: $*" >&2; exit 1; }
warn() { echo "warning: $*" >&2; }

need_value() { [ "$2" -ge 2 ] || die "$1: expected a value after the flag"; }

is_uint() {
  while [ $# -ge 2 ]; do
    [[ "$2" =~ ^(0|[1-9][0-9]*)$ ]] || die "$1 '$2': expected a non-negative integer"
    shift 2
  done
}

report_missing() {
  local mode=$1
  shift
  [ $# -gt 0 ] || return 0
  if [ "$mode" = dry ]; then
    printf 'warning: missing input (a real run stops here): %s\n' "$@" >&2
  else
    printf 'error: %s\n' "$@" >&2
    exit 1
  fi
}
