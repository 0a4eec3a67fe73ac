package repository_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/paygw/paygw/payment"
	"github.com/paygw/paygw/repository"
)

// The compact uk_idem_key (sql/00009_compact_idem_key.sql). Records written before the migration
// get their digest from it; the server's digest equals IdemDigest; lookups reach rows through the
// unique index; a second record for the same key is still refused, and keys that differ only in
// case or in which column a part sits in stay apart.
func TestCompactIdemKey(t *testing.T) {
	ctx := context.Background()
	dsn, db := databaseAt(t, 8)
	type key struct{ biz, scope, key string }
	keys := []key{
		{repository.BizPayNotify, "alipay", "2026120322001"},
		{repository.BizPayNotify, "alipay", "2026120322001x"},
		{repository.BizPayNotify, "wechatpay", "2026120322001"},
		{repository.BizRefundNotify, "alipay", "2026120322001"},
		{"order_create", "shop-a", "Key-1"},
		{"order_create", "shop-a", "key-1"},
		{"order_create", "shop-a\nkey", "1"}, // the separator inside a part: still its own key
		{"order_create", "shop-a", "key\n1"},
		{"order_create", "商户", strings.Repeat("k", 128)},
	}
	before := keys[:4]
	for _, k := range before {
		if _, err := db.Claim(ctx, k.biz, k.scope, k.key, "h", "tok"); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrating a table with records: %v", err)
	}
	for _, k := range keys[4:] {
		if _, err := db.Claim(ctx, k.biz, k.scope, k.key, "h", "tok"); err != nil {
			t.Fatalf("claim %q: %v", k, err)
		}
	}
	raw := rawDB(t, dsn)
	for _, k := range keys {
		var got []byte
		if err := raw.QueryRow(`SELECT idem_digest FROM idempotent_record WHERE idem_key = ? AND biz_type = ? AND scope = ?`,
			k.key, k.biz, k.scope).Scan(&got); err != nil {
			t.Fatalf("%q: %v", k, err)
		}
		if want := repository.IdemDigest(k.biz, k.scope, k.key); !bytes.Equal(got, want) {
			t.Fatalf("%q: the server's digest %x, IdemDigest %x", k, got, want)
		}
		rec, err := db.GetRecord(ctx, k.biz, k.scope, k.key)
		if err != nil || rec.Key != k.key || rec.Scope != k.scope || rec.BizType != k.biz {
			t.Fatalf("GetRecord %q = %+v, %v", k, rec, err)
		}
		if _, err := db.Claim(ctx, k.biz, k.scope, k.key, "h", "tok2"); !errors.Is(err, payment.ErrConflict) {
			t.Fatalf("a second claim of %q: %v, want the unique key's conflict", k, err)
		}
	}
	var plan sql.NullString
	var cols [10]sql.NullString
	row := raw.QueryRow(`EXPLAIN SELECT id FROM idempotent_record WHERE idem_digest = ? AND idem_key = ? AND biz_type = ? AND scope = ?`,
		repository.IdemDigest(keys[0].biz, keys[0].scope, keys[0].key), keys[0].key, keys[0].biz, keys[0].scope)
	if err := row.Scan(&cols[0], &cols[1], &cols[2], &cols[3], &cols[4], &plan, &cols[5], &cols[6], &cols[7], &cols[8]); err != nil {
		t.Fatal(err)
	}
	if plan.String != "uk_idem_key" {
		t.Fatalf("a lookup by digest uses key %q, want uk_idem_key", plan.String)
	}
}
