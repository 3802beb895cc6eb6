package config

import (
	"io"
	"strings"
	"testing"
)

// The mail throttles are flags with their documented defaults, each also
// read from its AUDITCHAIN_* variable; a throttle below 1 and a
// --trusted-proxies that does not parse are refused.
func TestThrottleFlags(t *testing.T) {
	none := func(string) string { return "" }
	c, err := Parse(nil, none, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.OTPLimitPerClient != 10 || c.OTPLimitGlobal != 500 || c.InviteLimitPerAccount != 100 || c.InviteLimitPerOrg != 100 ||
		c.InviteLimitPerRecipient != 5 || c.InviteLimitGlobal != 500 || c.TestNotifyLimitPerAccount != 10 || c.TestNotifyLimitGlobal != 200 ||
		c.TrustedProxies != "" {
		t.Fatalf("defaults %+v", c)
	}
	env := map[string]string{"AUDITCHAIN_OTP_LIMIT_PER_CLIENT": "7", "AUDITCHAIN_TRUSTED_PROXIES": "10.0.0.0/8"}
	c, err = Parse([]string{"--invite-limit-per-recipient", "2"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil || c.OTPLimitPerClient != 7 || c.TrustedProxies != "10.0.0.0/8" || c.InviteLimitPerRecipient != 2 {
		t.Fatalf("from the environment and the command line: %+v, %v", c, err)
	}
	for _, args := range [][]string{{"--otp-limit-per-client", "0"}, {"--test-notification-limit-global", "-1"}, {"--trusted-proxies", "proxy.example"}} {
		if _, err := Parse(args, none, io.Discard); err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("%v: %v, want an error naming the flag", args, err)
		}
	}
}
