# Shell functions the channels' testdata/make_*_vectors.sh scripts share: sourced, not run.
# They write form bodies as the channels send them, independently of the Go code under test.

# urlencode S: S percent-encoded byte by byte (run under LC_ALL=C), all but [A-Za-z0-9._~-].
urlencode() {
	local s=$1 out='' c i
	for ((i = 0; i < ${#s}; i++)); do
		c=${s:i:1}
		case $c in
		[A-Za-z0-9._~-]) out+=$c ;;
		*) out+=$(printf '%%%02X' "'$c") ;;
		esac
	done
	printf '%s' "$out"
}

# form_pairs < key=value lines: the lines as the start of a form body, in their order, each pair
# URL-encoded and followed by "&".
form_pairs() {
	local line k v
	while IFS= read -r line; do
		k=${line%%=*} v=${line#*=}
		printf '%s=%s&' "$(urlencode "$k")" "$(urlencode "$v")"
	done
}
