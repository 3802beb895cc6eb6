package console_test

import (
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
)

// watch records the page's requests and dialogs (it runs on the browser's
// reading goroutine: it only appends).
func (tb *tab) watch(ev any) {
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		tb.mu.Lock()
		tb.requests = append(tb.requests, ev.Request.URL)
		tb.mu.Unlock()
	case *page.EventJavascriptDialogOpening:
		tb.mu.Lock()
		tb.dialogs = append(tb.dialogs, ev.Message)
		tb.mu.Unlock()
	}
}
