#!/usr/bin/env bash
# Send a signed, Alipay-style asynchronous notification to a local paygw.
#
#   scripts/alipay-notify.sh TRADE_NO AMOUNT_YUAN [TRADE_STATUS]
#
#   TRADE_NO      paygw's trade number (Alipay's out_trade_no)
#   AMOUNT_YUAN   e.g. 19.99
#   TRADE_STATUS  TRADE_SUCCESS (default), TRADE_FINISHED, TRADE_CLOSED,
#                 WAIT_BUYER_PAY
#
# notify_id (sha1 of the arguments) and Alipay's trade_no (from TRADE_NO) are
# stable, so running it again with the same arguments sends the same
# notification again, as Alipay's retries do.
# Signed RSA2 (SHA256withRSA) with .demo/alipay_private.pem (scripts/demo.sh init).
#
# Env: PAYGW_URL (default http://127.0.0.1:8080), ALIPAY_PRIVATE_KEY,
#      ALIPAY_APP_ID (default 2021000000000000), NOTIFY_ID (override),
#      DRY_RUN=1 prints the signed string, signature and body; sends nothing.
set -euo pipefail

usage() {
  echo "usage: $0 TRADE_NO AMOUNT_YUAN [TRADE_STATUS=TRADE_SUCCESS]" >&2
  exit 2
}
if [ $# -lt 2 ] || [ $# -gt 3 ]; then usage; fi

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
OUT_TRADE_NO="$1"
AMOUNT="$2"
STATUS="${3:-TRADE_SUCCESS}"
URL="${PAYGW_URL:-http://127.0.0.1:8080}"
URL="${URL%/}/notify/alipay"
KEY="${ALIPAY_PRIVATE_KEY:-$REPO/.demo/alipay_private.pem}"
APP_ID="${ALIPAY_APP_ID:-2021000000000000}"

[ -n "$OUT_TRADE_NO" ] || usage
[[ "$AMOUNT" =~ ^[0-9]+(\.[0-9]{1,2})?$ ]] || { echo "AMOUNT_YUAN must look like 19.99, got '$AMOUNT'" >&2; exit 2; }
case "$STATUS" in
  TRADE_SUCCESS | TRADE_FINISHED | TRADE_CLOSED | WAIT_BUYER_PAY) ;;
  *) echo "unknown TRADE_STATUS '$STATUS'" >&2; exit 2 ;;
esac
[ -r "$KEY" ] || { echo "no private key at $KEY; run: scripts/demo.sh init" >&2; exit 1; }

export LC_ALL=C

sha1() { printf '%s' "$1" | sha1sum | cut -d' ' -f1; }

# n decimal digits derived from a string (stable).
digits() { # string n
  local h d="" i
  h="$(sha1 "$1")"
  for ((i = 0; i < 40 && ${#d} < $2; i += 7)); do
    d+="$(printf '%d' "$((16#${h:i:7}))")"
  done
  while [ "${#d}" -lt "$2" ]; do d+="0"; done
  printf '%s' "${d:0:$2}"
}

# RFC 3986 percent-encoding, byte by byte (UTF-8 safe with LC_ALL=C).
urlencode() {
  local s="$1" out="" c i
  for ((i = 0; i < ${#s}; i++)); do
    c="${s:i:1}"
    case "$c" in
      [A-Za-z0-9.~_-]) out+="$c" ;;
      *) out+="$(printf '%%%02X' "'$c")" ;;
    esac
  done
  printf '%s' "$out"
}

# Alipay timestamps are Beijing time (UTC+8); POSIX TZ needs no tzdata.
NOW="$(TZ=UTC-8 date '+%Y-%m-%d %H:%M:%S')"

declare -A P=(
  [notify_time]="$NOW"
  [notify_type]="trade_status_sync"
  [notify_id]="${NOTIFY_ID:-$(sha1 "notify|$OUT_TRADE_NO|$STATUS|$AMOUNT")}"
  [app_id]="$APP_ID"
  [charset]="utf-8"
  [version]="1.0"
  [sign_type]="RSA2"
  [trade_no]="2026$(digits "alipay-trade|$OUT_TRADE_NO" 24)"
  [out_trade_no]="$OUT_TRADE_NO"
  [out_biz_no]=""
  [buyer_id]="2088$(digits "buyer|$OUT_TRADE_NO" 12)"
  [buyer_logon_id]="dem***@example.com"
  [seller_id]="2088102177846880"
  [seller_email]="merchant@example.com"
  [trade_status]="$STATUS"
  [total_amount]="$AMOUNT"
  [receipt_amount]="$AMOUNT"
  [invoice_amount]="$AMOUNT"
  [buyer_pay_amount]="$AMOUNT"
  [point_amount]="0.00"
  [subject]="paygw demo order $OUT_TRADE_NO"
  [gmt_create]="$NOW"
  [fund_bill_list]="[{\"amount\":\"$AMOUNT\",\"fundChannel\":\"ALIPAYACCOUNT\"}]"
)
case "$STATUS" in
  TRADE_SUCCESS | TRADE_FINISHED) P[gmt_payment]="$NOW" ;;
  TRADE_CLOSED) P[gmt_close]="$NOW" ;;
esac

# String to sign: every parameter except sign and sign_type, empty values
# left out, sorted by key in byte order, joined as k=v&k=v (values raw).
mapfile -t KEYS < <(printf '%s\n' "${!P[@]}" | sort)
SIGNED=""
for k in "${KEYS[@]}"; do
  [ "$k" = sign ] || [ "$k" = sign_type ] || [ -z "${P[$k]}" ] && continue
  SIGNED+="${SIGNED:+&}$k=${P[$k]}"
done
SIGN="$(printf '%s' "$SIGNED" | openssl dgst -sha256 -sign "$KEY" | base64 | tr -d '\n')"
P[sign]="$SIGN"

BODY=""
for k in "${KEYS[@]}" sign; do
  [ -n "${P[$k]}" ] || continue
  BODY+="${BODY:+&}$k=$(urlencode "${P[$k]}")"
done

if [ "${DRY_RUN:-}" = 1 ]; then
  printf 'signed_string=%s\n' "$SIGNED"
  printf 'sign=%s\n' "$SIGN"
  printf 'body=%s\n' "$BODY"
  exit 0
fi

command -v curl >/dev/null 2>&1 || { echo "curl is required" >&2; exit 1; }
echo "POST $URL  out_trade_no=$OUT_TRADE_NO trade_status=$STATUS total_amount=$AMOUNT notify_id=${P[notify_id]}" >&2
RESP="$(mktemp)"
trap 'rm -f "$RESP"' EXIT
CODE="$(curl -sS -o "$RESP" -w '%{http_code}' -X POST \
  -H 'Content-Type: application/x-www-form-urlencoded; charset=utf-8' \
  --data-binary "$BODY" "$URL")" || { echo "request to $URL failed (is paygw running? make run)" >&2; exit 1; }
echo "HTTP $CODE"
cat "$RESP"
echo
[[ "$CODE" == 2?? ]]
