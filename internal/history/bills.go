package history

import (
	"archive/zip"
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/paygw/paygw/money"
	"github.com/paygw/paygw/simulate"
)

// Merchant identities the bills carry in their headers and columns: the sandbox's (simulate's
// fake channel writes the same).
const (
	AlipayPID = simulate.AlipayPID
)

// Member is one history of a run and its ids there.
type Member struct {
	H   History
	IDs IDs
}

// billLine is a line as a file renders it.
type billLine struct {
	refund   bool
	tradeNo  string
	txn      string
	refundID string // "" when the bill names none
	fen      int64  // ISO 4217 minor units of currency
	currency string
	at       time.Time
}

// BillFile renders the bill of bd in its channel's real format for the members' lines (and an
// invented line when the variant asks for one of a member's attempts): Alipay's 业务明细 CSV
// (GBK), WeChat's trade bill (ALL), Stripe's itemized balance report CSV, UnionPay's ZM file
// (GBK, fixed width). ok is false when the bill has no line at all. Truncated and untrusted
// variants are spoilt as Variant says; the caller picks the reader (see Open).
func BillFile(base time.Time, bd BillDay, members []Member, v Variant, target Target) (file []byte, ok bool) {
	var lines []billLine
	var invented *billLine
	for _, m := range members {
		for _, l := range m.H.Lines() {
			if l.Channel != bd.Channel || l.Day != bd.Day {
				continue
			}
			bl := billLine{refund: l.Refund, tradeNo: m.IDs.TradeNo, txn: m.IDs.Txn[l.Attempt], fen: l.AmountFen, currency: m.H.Code(), at: base.Add(l.At)}
			if l.Refund {
				bl.refundID = m.IDs.Refund[l.RefundK]
				if m.H.Refunds[l.RefundK].NoBillID {
					bl.refundID = ""
				}
			}
			lines = append(lines, bl)
		}
		if v == BillInvented && m.H.Seed == target.Seed && target.Attempt < len(m.H.Attempts) &&
			m.H.Attempts[target.Attempt].Channel == bd.Channel && m.H.Attempts[target.Attempt].Outcome != Paid {
			start := dayStart(base, bd)
			invented = &billLine{tradeNo: m.IDs.TradeNo, txn: m.IDs.Txn[target.Attempt], fen: m.H.AmountFen, currency: m.H.Code(),
				at: start.Add(12 * time.Hour)}
		}
	}
	slices.SortStableFunc(lines, func(a, b billLine) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.tradeNo, b.tradeNo)
	})
	if len(lines) == 0 && invented == nil {
		return nil, false
	}
	if v == BillInvented && invented == nil {
		v = BillUntrusted // the attempt it claims is not in this run: contradictory all the same
	}
	switch bd.Channel {
	case Alipay:
		return alipayBill(base, bd, lines, v, invented), true
	case WeChat:
		return wechatBill(lines, v, invented), true
	case Stripe:
		return stripeBill(lines), true
	default:
		return unionPayBill(base, bd, lines), true
	}
}

// dayStart is when channel day bd starts.
func dayStart(base time.Time, bd BillDay) time.Time {
	y, m, d := base.In(Zone(bd.Channel)).Add(12 * time.Hour).Date()
	return time.Date(y, m, d+bd.Day, 0, 0, 0, 0, Zone(bd.Channel))
}

// Date is the calendar date of channel day bd.
func Date(base time.Time, bd BillDay) time.Time { return dayStart(base, bd) }

func gbk(s string) []byte {
	b, err := simplifiedchinese.GBK.NewEncoder().Bytes([]byte(s))
	if err != nil {
		panic(err) // the text is ours, and GBK holds every character of it
	}
	return b
}

// major writes minor units of code in major units, with the currency's ISO 4217 decimals:
// 1999 CNY "19.99", 1999 JPY "1999", -1234 KWD "-1.234".
func major(minor int64, code string) string {
	return strings.TrimSuffix(money.Format(minor, code), " "+code)
}

// alipayBill is the 业务明细 file, GBK. Truncated ends inside the detail block (half its rows,
// the last one cut mid-line); untrusted states one 交易 more than it lists; invented lists a
// payment its summary does not count.
func alipayBill(base time.Time, bd BillDay, lines []billLine, v Variant, invented *billLine) []byte {
	day := dayStart(base, bd)
	var b strings.Builder
	b.WriteString(simulate.AlipayBillHead(day))
	var pays, refunds int
	var payFen, refundFen int64
	var rows []string
	row := func(l billLine) string {
		return simulate.AlipayBillRow{TxnID: l.txn, TradeNo: l.tradeNo, Goods: "history goods", Refund: l.refund, Fen: l.fen,
			At: l.at, RefundID: l.refundID}.Line()
	}
	for _, l := range lines {
		rows = append(rows, row(l))
		if l.refund {
			refunds++
			refundFen += l.fen
		} else {
			pays++
			payFen += l.fen
		}
	}
	if invented != nil {
		rows = append(rows, row(*invented))
	}
	if v == BillTruncated {
		keep := rows[:len(rows)/2]
		for _, r := range keep {
			b.WriteString(r + "\n")
		}
		if len(rows) > len(keep) {
			b.WriteString(rows[len(keep)][:len(rows[len(keep)])/2]) // cut mid-line
		}
		return gbk(b.String())
	}
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	if v == BillUntrusted {
		pays++
	}
	b.WriteString(simulate.AlipayBillFoot(pays, refunds, payFen, refundFen, day.AddDate(0, 0, 1).Add(9*time.Hour)))
	return gbk(b.String())
}

// AlipayZip wraps the 业务明细 file as Alipay's download does: <PID>0156_<yyyyMMdd>.csv.zip with
// the detail and the 汇总 entries, GBK names without the UTF-8 flag.
func AlipayZip(day time.Time, detail []byte) []byte {
	base := AlipayPID + "0156_" + day.Format("20060102")
	summary := gbk("#支付宝业务汇总查询\n#账号：[" + AlipayPID + "0156]\n门店编号,门店名称,交易订单总笔数,退款订单总笔数\n")
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, e := range []struct {
		name string
		data []byte
	}{{base + "_业务明细.csv", detail}, {base + "_业务明细(汇总).csv", summary}} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: string(gbk(e.name)), Method: zip.Deflate, NonUTF8: true})
		if err == nil {
			_, err = w.Write(e.data)
		}
		if err != nil {
			panic(err) // writes to memory
		}
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return out.Bytes()
}

// wechatBill is the ALL trade bill, UTF-8, CRLF. Truncated ends before its summary (and inside
// a row); untrusted states one row more than it has; invented has a SUCCESS row its summary
// does not count.
func wechatBill(lines []billLine, v Variant, invented *billLine) []byte {
	var b strings.Builder
	b.WriteString(simulate.WeChatBillHeader + "\r\n")
	var rows []string
	var n int
	var orderFen, refundFen int64
	row := func(l billLine) string {
		return simulate.WeChatBillRow{AppID: simulate.SandboxWeChatAppID, MchID: simulate.SandboxWeChatMchID, TxnID: l.txn, TradeNo: l.tradeNo,
			Currency: "CNY", Goods: "history goods", Refund: l.refund, Fen: l.fen, At: l.at, RefundID: l.refundID}.Line()
	}
	for _, l := range lines {
		rows = append(rows, row(l))
		n++
		if l.refund {
			refundFen += l.fen
		} else {
			orderFen += l.fen
		}
	}
	if invented != nil {
		rows = append(rows, row(*invented))
	}
	if v == BillTruncated {
		keep := rows[:(len(rows)+1)/2]
		for i, r := range keep {
			if i == len(keep)-1 {
				r = r[:len(r)/2]
			}
			b.WriteString(r + "\r\n")
		}
		return []byte(b.String())
	}
	for _, r := range rows {
		b.WriteString(r + "\r\n")
	}
	if v == BillUntrusted {
		n++
	}
	b.WriteString(simulate.WeChatBillSummary(n, orderFen, refundFen))
	return []byte(b.String())
}

// stripeBill is the balance_change_from_activity.itemized.3 report, UTC, major units of each
// line's currency (its ISO 4217 decimals: Stripe's own API units play no part in a report): a
// charge row per payment (source_id its charge), a refund row per refund (source_id its re_ id).
func stripeBill(lines []billLine) []byte {
	var b strings.Builder
	b.WriteString("balance_transaction_id,created_utc,currency,gross,fee,net,reporting_category,source_id,payment_intent_id,payment_metadata[trade_no]\n")
	for i, l := range lines {
		cat, gross, source := "charge", l.fen, "ch_"+strings.TrimPrefix(l.txn, "pi_")
		if l.refund {
			cat, gross, source = "refund", -l.fen, l.refundID
		}
		fmt.Fprintf(&b, "txn_%s%d,%s,%s,%s,0,%s,%s,%s,%s,%s\n", strings.TrimPrefix(l.txn, "pi_")[:12], i,
			l.at.UTC().Format(time.DateTime), strings.ToLower(l.currency), major(gross, l.currency), major(gross, l.currency),
			cat, source, l.txn, l.tradeNo)
	}
	return []byte(b.String())
}

// unionPayBill is the ZM file in its zip, as UnionPay's file download holds it: a consume (01)
// per payment, its queryId the notification's; a refund (04) per refund, its own queryId and the
// consume's in origQryId.
func unionPayBill(base time.Time, bd BillDay, lines []billLine) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		r := simulate.UnionPayZMRecord{MerID: simulate.SandboxUnionPayMerID, TradeNo: l.tradeNo, QueryID: l.txn, Fen: l.fen, At: l.at}
		if l.refund {
			r.Refund, r.QueryID, r.OrigQueryID = true, l.refundID, l.txn
		}
		line, err := r.Line()
		if err != nil {
			panic(err) // the fields are ours, and fit
		}
		b.Write(line)
	}
	zipped, err := simulate.UnionPayZMZip(simulate.SandboxUnionPayMerID, dayStart(base, bd), b.Bytes())
	if err != nil {
		panic(err) // writes to memory
	}
	return zipped
}
