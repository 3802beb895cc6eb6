package config

// The throttles of everything that makes the service send mail, and the
// proxies whose X-Forwarded-For names the client (docs/decisions/throttles.md).

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Defaults of the mail throttles; a Config built without Parse (zero) has
// them too. Each is a GCRA budget: that many at once from idle, then one
// every period/limit.
const (
	DefaultOTPLimitPerClient         = 10  // sign-in codes per client address per hour
	DefaultOTPLimitGlobal            = 500 // sign-in codes per hour, every client
	DefaultInviteLimitPerAccount     = 100 // invitations an account sends per day
	DefaultInviteLimitPerOrg         = 100 // invitations a team sends per day
	DefaultInviteLimitPerRecipient   = 5   // invitations mailed to one address per day
	DefaultInviteLimitGlobal         = 500 // invitations per hour, every team
	DefaultTestNotifyLimitPerAccount = 10  // test notifications per account per hour
	DefaultTestNotifyLimitGlobal     = 200 // test notifications per hour, every account
)

// checkThrottles refuses a throttle below 1 (0 would stop that mail
// altogether) and a --trusted-proxies that does not parse.
func (c Config) checkThrottles() []error {
	var errs []error
	for _, t := range []struct {
		flag  string
		value int
	}{
		{"otp-limit-per-client", c.OTPLimitPerClient}, {"otp-limit-global", c.OTPLimitGlobal},
		{"invite-limit-per-account", c.InviteLimitPerAccount}, {"invite-limit-per-org", c.InviteLimitPerOrg},
		{"invite-limit-per-recipient", c.InviteLimitPerRecipient}, {"invite-limit-global", c.InviteLimitGlobal},
		{"test-notification-limit-per-account", c.TestNotifyLimitPerAccount}, {"test-notification-limit-global", c.TestNotifyLimitGlobal},
	} {
		if t.value < 1 {
			errs = append(errs, fmt.Errorf("--%s must be at least 1", t.flag))
		}
	}
	if _, err := ParseTrustedProxies(c.TrustedProxies); err != nil {
		errs = append(errs, fmt.Errorf("--trusted-proxies: %w", err))
	}
	return errs
}

// ParseTrustedProxies reads --trusted-proxies: addresses and CIDR prefixes,
// separated by commas ("" trusts nobody).
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.Contains(item, "/") {
			p, err := netip.ParsePrefix(item)
			if err != nil {
				return nil, fmt.Errorf("%q is not an address or a CIDR prefix", item)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(item)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q is not an address or a CIDR prefix", item)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	if strings.TrimSpace(s) != "" && len(out) == 0 {
		return nil, errors.New("names no address")
	}
	return out, nil
}
