package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/auditchain/auditchain/internal/app"
	"github.com/auditchain/auditchain/internal/config"
	"github.com/auditchain/auditchain/internal/domain"
	"github.com/auditchain/auditchain/internal/mail"
	"github.com/auditchain/auditchain/internal/store"
	"github.com/auditchain/auditchain/pkg/api"
)

// codeCatcher is the mailer of the bench's in-process app: it keeps the
// one-time code each sign-in message carries, by recipient, instead of
// sending it.
type codeCatcher struct {
	mu    sync.Mutex
	codes map[string]string
}

func (c *codeCatcher) Send(_ context.Context, m mail.Message) error {
	i := strings.LastIndex(m.Subject, ": ")
	if i < 0 {
		return fmt.Errorf("bench: no code in the subject %q", m.Subject)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.codes == nil {
		c.codes = map[string]string{}
	}
	c.codes[m.To] = m.Subject[i+2:]
	return nil
}

func (c *codeCatcher) code(email string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	code, ok := c.codes[email]
	if !ok {
		return "", fmt.Errorf("bench: no code was mailed to %s", email)
	}
	return code, nil
}

// signInApp is an app over the bench store whose mail the catcher keeps: it
// requests codes (and, for --session, verifies them) exactly as the server
// would, without a mail transport in the way.
func signInApp(st *store.Store) (*app.App, *codeCatcher) {
	// The bench signs in as many accounts as it needs, at once: the
	// deployment-wide budget of sign-in codes is no limit here.
	c := &codeCatcher{}
	a := app.New(app.Deps{Store: st, Config: config.Config{EpochAnchor: domain.DefaultEpochAnchor, SessionTTL: domain.DefaultSessionTTL,
		OTPLimitGlobal: math.MaxInt32}, Mail: c})
	return a, c
}

// benchEmail is the email of bench account i of the run with prefix.
func benchEmail(prefix string, i int) string {
	return fmt.Sprintf("%s-%d@bench.example", prefix, i)
}

// signIn requests a code for email and verifies it: the session token.
func signIn(ctx context.Context, a *app.App, c *codeCatcher, email string) (string, error) {
	if _, err := a.RequestOTP(ctx, "", api.OTPRequest{Email: &email}); err != nil {
		return "", err
	}
	code, err := c.code(email)
	if err != nil {
		return "", err
	}
	s, err := a.VerifyOTP(ctx, api.OTPVerify{Email: &email, Code: &code})
	if err != nil {
		return "", err
	}
	return s.Token, nil
}

// otpVerifySetup prepares one live code per verification the run will make
// (rate × (warmup + duration), and a margin), each for its own existing
// account so the per-email request limit never bites, then verifies one code
// per operation. It needs an open loop: a closed one has no bound on the
// codes it would spend.
func otpVerifySetup(ctx context.Context, e *env) (func(w *worker) opFunc, error) {
	if e.rate <= 0 {
		return nil, errors.New("otp-verify spends one prepared code per operation: it runs in an open loop (--rate, default 200)")
	}
	n := int(e.rate*(e.o.Warmup+e.o.Duration).Seconds()) + e.clients + 64
	st, err := store.Open(ctx, e.db)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	a, catcher := signInApp(st)
	fmt.Fprintf(e.progress, "bench: preparing %d sign-in codes\n", n)
	codes := make([][]byte, n) // the verify request bodies
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 8)
	start := time.Now()
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				email := benchEmail(e.prefix+"v", i)
				if _, _, err := a.CreateAccount(ctx, app.AccountRequest{Email: email}); err != nil {
					errs[g] = err
					return
				}
				if _, err := a.RequestOTP(ctx, "", api.OTPRequest{Email: &email}); err != nil {
					errs[g] = err
					return
				}
				code, err := catcher.code(email)
				if err != nil {
					errs[g] = err
					return
				}
				codes[i] = []byte(`{"email":"` + email + `","code":"` + code + `"}`)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return nil, fmt.Errorf("prepare sign-in codes: %w", err)
	}
	fmt.Fprintf(e.progress, "bench: %d codes in %v\n", n, time.Since(start).Round(time.Millisecond))
	var taken atomic.Int64
	signedIn := []byte(`"user_id"`)
	return func(w *worker) opFunc {
		return func(ctx context.Context, w *worker) (int, error) {
			i := taken.Add(1) - 1
			if i >= int64(len(codes)) {
				return 0, errAbort{errors.New("otp-verify ran out of prepared codes")}
			}
			_, err := w.c.do(ctx, "POST", "/v1/auth/otp/verify", "", codes[i], &w.resp)
			if ab := notBuilt(err); ab != nil {
				return 0, ab
			}
			if err == nil && !bytes.Contains(w.resp.Bytes(), signedIn) {
				err = fmt.Errorf("verify answered without a user_id: %s", w.resp.String())
			}
			return 1, err
		}
	}, nil
}
