package bills

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// The scale benchmarks read a generated one-million-line bill from a temporary file, and report
// lines per second and the peak heap (HeapInuse, sampled every 20 ms while reading). Run them
// with: go test -run xxx -bench . -benchtime 1x ./bills

const benchLines = 1_000_000

// writeBill generates a bill file of n detail rows through write, once per benchmark.
func writeBill(b *testing.B, name string, gbkEncode bool, write func(w io.Writer)) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), name)
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var w io.Writer = bw
	if gbkEncode {
		w = simplifiedchinese.GBK.NewEncoder().Writer(bw)
	}
	write(w)
	if c, ok := w.(io.Closer); ok {
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path
}

// heapPeak samples HeapInuse until stop is called, which returns the peak in bytes.
func heapPeak() (stop func() uint64) {
	var (
		wg   sync.WaitGroup
		peak uint64
		done = make(chan struct{})
	)
	sample := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapInuse)
	}
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				sample()
				return
			case <-t.C:
				sample()
			}
		}
	})
	return func() uint64 { close(done); wg.Wait(); return peak }
}

func benchRead(b *testing.B, path string, open func(f *os.File) Reader, wantLines int) {
	b.Helper()
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	runtime.GC()
	stop := heapPeak()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		r := open(f)
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatalf("after %d lines: %v", n, err)
			}
			n++
		}
		f.Close()
		if n != wantLines || r.Summary().Mismatch != "" {
			b.Fatalf("%d lines, want %d; summary %+v", n, wantLines, r.Summary())
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	peak := stop()
	b.ReportMetric(float64(wantLines*b.N)/elapsed.Seconds(), "lines/s")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
}

func BenchmarkWeChat1M(b *testing.B) {
	var payFen, refundFen int64
	path := writeBill(b, "wechat.csv", false, func(w io.Writer) {
		fmt.Fprintln(w, wechatTestHeader)
		for i := range benchLines {
			fen := int64(i%100000 + 1)
			ts := time.Date(2024, 5, 1, 0, 0, 0, 0, ChinaTime).Add(time.Duration(i%86400) * time.Second).Format(time.DateTime)
			if i%10 == 9 {
				refundFen += fen
				fmt.Fprintf(w, "`%s,`wx81be3101902f7cb2,`1601959334,`0,`,`42000%023d,`T%d,`oUser,`NATIVE,`REFUND,`OTHERS,`CNY,`0.00,`0.00,`503%026d,`R%d,`%d.%02d,`0.00,`ORIGINAL,`SUCCESS,`Tea,`,`0.00000,`0.60%%,`0.00,`%d.%02d,`\r\n",
					ts, i-1, i-1, i, i, fen/100, fen%100, fen/100, fen%100)
				continue
			}
			payFen += fen
			fmt.Fprintf(w, "`%s,`wx81be3101902f7cb2,`1601959334,`0,`,`42000%023d,`T%d,`oUser,`NATIVE,`SUCCESS,`OTHERS,`CNY,`%d.%02d,`0.00,`0,`0,`0.00,`0.00,`,`,`Tea,`,`0.00000,`0.60%%,`%d.%02d,`0.00,`\r\n",
				ts, i, i, fen/100, fen%100, fen/100, fen%100)
		}
		fmt.Fprintf(w, "%s\r\n`%d,`0.00,`%d.%02d,`0.00,`0.00000,`%d.%02d,`0.00\r\n", wechatSummaryHeader, benchLines, refundFen/100, refundFen%100, payFen/100, payFen%100)
	})
	benchRead(b, path, func(f *os.File) Reader { return NewWeChat(f) }, benchLines)
}

func BenchmarkAlipay1M(b *testing.B) {
	var pays, refunds int
	var payFen, refundFen int64
	path := writeBill(b, "alipay.csv", true, func(w io.Writer) {
		fmt.Fprint(w, "#支付宝业务明细查询\r\n#账号：[20880211096256330156]\r\n#-----------------------------------------业务明细列表----------------------------------------\r\n")
		fmt.Fprint(w, alipayTestHeader+"\r\n")
		for i := range benchLines {
			fen := int64(i%100000 + 1)
			ts := time.Date(2024, 5, 1, 0, 0, 0, 0, ChinaTime).Add(time.Duration(i%86400) * time.Second).Format(time.DateTime)
			kind, sign, refundID := "交易", "", ""
			if i%10 == 9 {
				kind, sign, refundID = "退款", "-", fmt.Sprintf("rq_%d", i)
				refunds++
				refundFen += fen
			} else {
				pays++
				payFen += fen
			}
			amount := fmt.Sprintf("%s%d.%02d", sign, fen/100, fen%100)
			fmt.Fprint(w, alipayRow(fmt.Sprintf("2024050122%018d", i), fmt.Sprintf("T%d", i), kind, ts, amount, amount, refundID)+"\r\n")
		}
		fmt.Fprint(w, "#-----------------------------------------业务明细列表结束------------------------------------\r\n")
		fmt.Fprintf(w, "#交易合计：%d笔，商家实收共%d.%02d元，商家优惠共0.00元\r\n", pays, payFen/100, payFen%100)
		fmt.Fprintf(w, "#退款合计：%d笔，商家实收退款共-%d.%02d元，商家优惠退款共0.00元\r\n", refunds, refundFen/100, refundFen%100)
	})
	benchRead(b, path, func(f *os.File) Reader { return NewAlipayCSV(f) }, benchLines)
}
