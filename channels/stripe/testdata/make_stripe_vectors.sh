#!/usr/bin/env bash
# Regenerates the Stripe test vectors in stripe_vectors.txt from the stripe_*.json event bodies.
#
# The signatures are computed here with openssl, independently of the Go code under test and of
# stripe-go: hex(HMAC-SHA256(secret, t + "." + raw body)), the whole secret (whsec_ included) as
# the key, sent as `Stripe-Signature: t=<unix>,v1=<hex>` (Stripe's webhook documentation).
#
# Output: one vector a line, three tab-separated fields: body file, secret, Stripe-Signature value.
# Usage: ./make_stripe_vectors.sh   (from anywhere; writes next to itself)
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")"

# Test secrets only: nothing here is, or ever signs for, a real Stripe endpoint.
secret=whsec_paygwTestSecret0000000000000001

{
	echo "# made by make_stripe_vectors.sh; signed with openssl, t = the event's created + 2 s"
	for f in stripe_payment_intent_succeeded.json stripe_checkout_session_completed.json stripe_charge_refunded.json \
		stripe_charge_refunded_list.json; do
		# The event's own "created" (the first one in the file, at two spaces of indent).
		created=$(sed -n 's/^  "created": \([0-9]*\),$/\1/p' "$f")
		t=$((created + 2))
		sig=$({ printf '%s.' "$t"; cat "$f"; } | openssl dgst -sha256 -hmac "$secret" -r | cut -d' ' -f1)
		printf '%s\t%s\tt=%s,v1=%s\n' "$f" "$secret" "$t" "$sig"
	done
} > stripe_vectors.txt
