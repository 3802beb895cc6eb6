package webhook_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/auditchain/auditchain/internal/notify/webhook"
)

// testSecret is derived from fixed bytes so failures reproduce.
func testSecret(t *testing.T, fill byte) string {
	t.Helper()
	secret, err := webhook.NewSecret(bytes.NewReader(bytes.Repeat([]byte{fill}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

func signedHeaders(msgID string, ts time.Time, signature string) http.Header {
	h := http.Header{}
	h.Set(standardwebhooks.HeaderWebhookID, msgID)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, signature)
	return h
}

func TestNewSecret(t *testing.T) {
	secret := testSecret(t, 7)
	encoded, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		t.Fatalf("secret %q lacks the whsec_ prefix", secret)
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		t.Fatalf("secret %q is not standard base64: %v", secret, err)
	}
	if !bytes.Equal(key, bytes.Repeat([]byte{7}, 32)) {
		t.Errorf("key = %x, want the 32 bytes read", key)
	}

	if _, err := webhook.NewSecret(bytes.NewReader(make([]byte, 31))); err == nil {
		t.Error("NewSecret accepted a reader with 31 bytes")
	}
	if _, err := webhook.NewSecret(iotest.ErrReader(iotest.ErrTimeout)); err == nil {
		t.Error("NewSecret ignored the reader's error")
	}
}

// The vector the reference libraries (Go, Python, JavaScript) all test.
func TestSignKnownVector(t *testing.T) {
	got, err := webhook.Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek",
		time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign = %q, want %q", got, want)
	}
}

func TestSignVerifiedByReferenceLibrary(t *testing.T) {
	secret := testSecret(t, 7)
	const msgID = "msg_2vYgmT1pQxV0"
	body := []byte(`{"type":"event.appended","data":{"seq":42}}`)
	// Verify enforces a five-minute window around the wall clock, so this
	// one timestamp has to be now.
	ts := time.Now()
	signature, err := webhook.Sign(secret, msgID, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	receiver, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := receiver.Verify(body, signedHeaders(msgID, ts, signature)); err != nil {
		t.Fatalf("reference library rejects our signature: %v", err)
	}

	wrongReceiver, err := standardwebhooks.NewWebhook(testSecret(t, 8))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		receiver *standardwebhooks.Webhook
		body     []byte
		header   http.Header
	}{
		{"wrong secret", wrongReceiver, body, signedHeaders(msgID, ts, signature)},
		{"tampered body", receiver, []byte(`{"type":"event.appended","data":{"seq":43}}`), signedHeaders(msgID, ts, signature)},
		{"other msg id", receiver, body, signedHeaders("msg_other", ts, signature)},
		{"other time", receiver, body, signedHeaders(msgID, ts.Add(time.Second), signature)},
	} {
		if err := tc.receiver.Verify(tc.body, tc.header); err == nil {
			t.Errorf("%s: reference library accepted the signature", tc.name)
		}
	}
}

func TestSignRejectsMalformedSecrets(t *testing.T) {
	for _, secret := range []string{
		"",
		"whsec_",
		"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", // no prefix
		"whsec_not base64!",
	} {
		if sig, err := webhook.Sign(secret, "msg_1", time.Unix(0, 0), nil); err == nil {
			t.Errorf("Sign(%q) = %q, want an error", secret, sig)
		}
	}
}
