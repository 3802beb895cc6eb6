// Package config builds the one Config of `auditchain serve` from flags and
// AUDITCHAIN_* environment variables (CONTRACT.md "Running it"): every flag
// --foo-bar also reads AUDITCHAIN_FOO_BAR, and a flag on the command line wins.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Config is validated once by Parse; nothing else reads flags or the environment.
type Config struct {
	Addr                string
	DB                  string
	CreateDB            bool // a sqlite: file that does not exist may be created
	Env                 string
	CronSecret          string
	Teams               bool
	GovernanceThreshold int
	DailyEventQuota     int
	BatchRateLimit      int
	StreamPing          time.Duration
	MaxStreams          int // open event streams per account, across replicas
	MaxKeys             int // live API keys per account
	Mail                string
	MailFrom            string
	OperatorEmail       string
	SessionTTL          time.Duration
	LegalDir            string
	LegalEnforce        bool
	AnchorProvider      string
	AnchorTSAURL        string
	WebhookAllowPrivate bool
	Scheduler           bool
	EpochAnchor         time.Time
	LogFormat           string
	LogLevel            string
	MaxBodyBytes        int64
	ServiceKeyFile      string
	PinState            string // a pin-state file the store must hold (serve refuses to start otherwise)
	DBMaxConns          int
	DebugAddr           string
	ShutdownTimeout     time.Duration
	RequestTimeout      time.Duration
	// Mail throttles (throttles.go): budgets shared by every replica.
	OTPLimitPerClient         int
	OTPLimitGlobal            int
	InviteLimitPerAccount     int
	InviteLimitPerOrg         int
	InviteLimitPerRecipient   int
	InviteLimitGlobal         int
	TestNotifyLimitPerAccount int
	TestNotifyLimitGlobal     int
	// TrustedProxies lists the proxies whose X-Forwarded-For names the
	// client of the per-client throttles (ParseTrustedProxies).
	TrustedProxies string
	// AnnounceLimitPerDay bounds `admin announce` (its --limit-per-day,
	// not a serve flag).
	AnnounceLimitPerDay int
	// Witnesses are the C2SP tlog-witness witnesses each account's
	// checkpoints are submitted to (--witness URL=VKEY, repeatable), and
	// WitnessQuorum how many cosignatures a checkpoint needs to count as
	// witnessed (--witness-quorum; default all of them). witnesses.go.
	Witnesses     []Witness
	WitnessQuorum int
}

// Production reports whether --env production is set.
func (c Config) Production() bool { return c.Env == "production" }

// Defaults of the per-account caps; a Config built without Parse (zero)
// has them too.
const (
	DefaultMaxStreams = 32
	DefaultMaxKeys    = 100
)

// DefaultDB is the embedded store used when --db is not given.
const DefaultDB = "sqlite:./data/auditchain.db"

// Parse reads the serve flags. getenv supplies AUDITCHAIN_* defaults so tests
// never touch the process environment. A setting comes from its flag, else
// its AUDITCHAIN_* variable, else the --config file (file.go), else the
// built-in default.
func Parse(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c Config
	var anchor string
	configFile := configPath(args, getenv)
	file, err := loadSettings(configFile)
	if err != nil {
		return Config{}, err
	}
	var errs []error
	envName := func(name string) string { return "AUDITCHAIN_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")) }
	// start is a flag's value before the command line, and where it came
	// from (for a message that cannot parse it).
	start := func(name, def string, kind valueKind) (value, from string) {
		// The file is read first even when the environment wins, so that
		// its key counts as known and its type is checked.
		v, inFile, err := file.value(name, kind)
		if err != nil {
			errs = append(errs, err)
		}
		switch {
		case getenv(envName(name)) != "":
			return getenv(envName(name)), envName(name)
		case inFile && err == nil:
			return v, "--config " + configFile + ": " + name
		}
		return def, ""
	}
	env := func(name, def string) string { v, _ := start(name, def, kindString); return v }
	str := func(p *string, name, def, usage string) { fs.StringVar(p, name, env(name, def), usage) }
	// A value that may carry a credential is never printed (SecretVar).
	secret := func(p *string, name, def, usage string) { SecretVar(fs, p, name, env(name, def), def, usage) }
	integer := func(p *int, name string, def int, usage string) {
		s, from := start(name, strconv.Itoa(def), kindInt)
		v, err := strconv.Atoi(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", from, err))
		}
		fs.IntVar(p, name, v, usage)
	}
	boolean := func(p *bool, name string, def bool, usage string) {
		s, from := start(name, strconv.FormatBool(def), kindBool)
		v, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", from, err))
		}
		fs.BoolVar(p, name, v, usage)
	}
	duration := func(p *time.Duration, name string, def time.Duration, usage string) {
		s, from := start(name, def.String(), kindString)
		v, err := ParseDuration(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", from, err))
		}
		DurationVar(fs, p, name, v, usage)
	}

	fs.StringVar(&configFile, ConfigFlag, configFile, "TOML file of settings named as these flags (AUDITCHAIN_CONFIG); flags and AUDITCHAIN_* win over it")
	str(&c.Addr, "addr", "127.0.0.1:8080", "listen address")
	secret(&c.DB, "db", DefaultDB, "store: sqlite:PATH or a postgres:// URL")
	boolean(&c.CreateDB, "create-db", false, "create the sqlite: store if its file does not exist (the default ./data/auditchain.db is created without it)")
	str(&c.Env, "env", "development", "development or production")
	secret(&c.CronSecret, "cron-secret", "", "shared secret for /v1/internal/cron/* (unset: those routes answer 503)")
	boolean(&c.Teams, "teams", false, "enable team (org) routes")
	integer(&c.GovernanceThreshold, "governance-threshold", 3, "blocked attempts needed to propose a rule")
	integer(&c.DailyEventQuota, "daily-event-quota", 10000, "events per account per UTC day")
	integer(&c.BatchRateLimit, "batch-rate-limit", 100, "batch events per minute per key")
	duration(&c.StreamPing, "stream-ping", 15*time.Second, "SSE ping interval")
	integer(&c.MaxStreams, "max-streams-per-account", DefaultMaxStreams, "open event streams per account, across replicas (each key also holds at most 16)")
	integer(&c.MaxKeys, "max-keys-per-account", DefaultMaxKeys, "live (unrevoked, unexpired) API keys per account")
	secret(&c.Mail, "mail", "log", "mail transport: log, outbox:DIR or smtp://user:pass@host:port")
	str(&c.MailFrom, "mail-from", "auditchain <auditchain@localhost>", "sender address of the service's mail")
	duration(&c.SessionTTL, "session-ttl", 168*time.Hour, "how long a signed-in session lasts")
	str(&c.LegalDir, "legal-dir", "", "directory of legal documents replacing or adding to the built-in ones (manifest.json and <document_id>.md)")
	boolean(&c.LegalEnforce, "legal-enforce", false, "refuse credentialed routes (but auth, keys and legal) while a required document is unmet")
	str(&c.OperatorEmail, "operator-email", "", "recipient of the operator digest")
	// The provider name is not refused here: the anchor sweep reports an
	// invalid one as provider_misconfigured (SPEC.md "Operator cron").
	str(&c.AnchorProvider, "anchor-provider", "none", "anchoring provider: none or rfc3161")
	secret(&c.AnchorTSAURL, "anchor-tsa-url", "", "RFC 3161 Time-Stamp Authority URL (with --anchor-provider rfc3161)")
	boolean(&c.WebhookAllowPrivate, "webhook-allow-private", false, "allow webhook targets on private addresses")
	boolean(&c.Scheduler, "scheduler", true, "run the operator jobs on their schedule inside serve (false: call the cron routes yourself)")
	str(&anchor, "epoch-anchor", "2025-01-01", "epoch stamp origin date (YYYY-MM-DD)")
	str(&c.LogFormat, "log-format", "", "json or text (default: json in production, text otherwise)")
	str(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	var maxBody int
	integer(&maxBody, "max-body-bytes", 1<<20, "largest request body accepted (batch requests get 8x)")
	integer(&c.DBMaxConns, "db-max-conns", 32, "PostgreSQL pool size per replica")
	str(&c.DebugAddr, "debug-addr", "", "serve net/http/pprof on this separate address (never on --addr)")
	str(&c.ServiceKeyFile, "service-key-file", "", "Ed25519 service identity key file (default: kept in the store)")
	str(&c.PinState, "pin-state", "", "pin-state `FILE` written by auditchain admin pin: refuse to start when the store is behind it (a restore rolled accounts back)")
	duration(&c.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long in-flight requests may take on SIGTERM")
	duration(&c.RequestTimeout, "request-timeout", 15*time.Second, "how long a request may wait on the store before it answers 503 (streams, exports, heal and cron runs are not cut)")
	integer(&c.OTPLimitPerClient, "otp-limit-per-client", DefaultOTPLimitPerClient, "sign-in codes mailed per client address per hour (an IPv6 client: per /64)")
	integer(&c.OTPLimitGlobal, "otp-limit-global", DefaultOTPLimitGlobal, "sign-in codes mailed per hour, every client together")
	integer(&c.InviteLimitPerAccount, "invite-limit-per-account", DefaultInviteLimitPerAccount, "team invitations one account sends per day")
	integer(&c.InviteLimitPerOrg, "invite-limit-per-org", DefaultInviteLimitPerOrg, "team invitations one team sends per day")
	integer(&c.InviteLimitPerRecipient, "invite-limit-per-recipient", DefaultInviteLimitPerRecipient, "team invitations mailed to one address per day, from every team")
	integer(&c.InviteLimitGlobal, "invite-limit-global", DefaultInviteLimitGlobal, "team invitations mailed per hour, every team together")
	integer(&c.TestNotifyLimitPerAccount, "test-notification-limit-per-account", DefaultTestNotifyLimitPerAccount, "POST /v1/notifications/test calls per account per hour")
	integer(&c.TestNotifyLimitGlobal, "test-notification-limit-global", DefaultTestNotifyLimitGlobal, "POST /v1/notifications/test calls per hour, every account together")
	str(&c.TrustedProxies, "trusted-proxies", "", "comma-separated addresses or CIDR prefixes of reverse proxies whose X-Forwarded-For names the client (default: none, the TCP peer is the client)")
	witnessSpecs := &listValue{}
	if v, from, err := file.list("witness"); err != nil {
		errs = append(errs, err)
	} else if env := getenv(envName("witness")); env != "" {
		witnessSpecs.set(splitList(env), envName("witness"))
	} else {
		witnessSpecs.set(v, from)
	}
	fs.Var(witnessSpecs, "witness", "a C2SP tlog-witness `URL=VKEY` each account's checkpoints are submitted to (repeatable; VKEY is the witness's note verifier key)")
	integer(&c.WitnessQuorum, "witness-quorum", 0, "cosignatures a checkpoint needs to count as witnessed (0: every --witness)")

	if err := file.syntaxError(func(key string) bool { return isSecret(fs, key) }); err != nil {
		return Config{}, err
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	errs = append(errs, file.unknown(names)...)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return Config{}, err
		}
		return Config{}, &FlagError{Err: err, Flags: fs}
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %v", fs.Args()))
	}
	c.MaxBodyBytes = int64(maxBody)
	c.Witnesses, c.WitnessQuorum, err = parseWitnesses(witnessSpecs, c.WitnessQuorum)
	if err != nil {
		errs = append(errs, err)
	}
	if t, err := time.Parse(time.DateOnly, anchor); err != nil {
		errs = append(errs, fmt.Errorf("--epoch-anchor: %q is not YYYY-MM-DD", anchor))
	} else {
		c.EpochAnchor = t
	}
	if c.Env != "development" && c.Env != "production" {
		errs = append(errs, fmt.Errorf("--env must be development or production, got %q", c.Env))
	}
	if c.GovernanceThreshold < 1 {
		errs = append(errs, errors.New("--governance-threshold must be at least 1"))
	}
	if c.DailyEventQuota < 1 {
		errs = append(errs, errors.New("--daily-event-quota must be at least 1"))
	}
	if c.BatchRateLimit < 1 {
		errs = append(errs, errors.New("--batch-rate-limit must be at least 1"))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, errors.New("--request-timeout must be positive"))
	}
	if c.SessionTTL < time.Minute {
		errs = append(errs, errors.New("--session-ttl must be at least 1m"))
	}
	if c.MaxStreams < 1 {
		errs = append(errs, errors.New("--max-streams-per-account must be at least 1"))
	}
	if c.MaxKeys < 1 {
		errs = append(errs, errors.New("--max-keys-per-account must be at least 1"))
	}
	if c.StreamPing <= 0 {
		errs = append(errs, errors.New("--stream-ping must be positive"))
	}
	if c.DBMaxConns < 1 {
		errs = append(errs, errors.New("--db-max-conns must be at least 1"))
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, errors.New("--max-body-bytes must be at least 1024"))
	}
	errs = append(errs, c.checkThrottles()...)
	if c.LogFormat == "" {
		c.LogFormat = "text"
		if c.Production() {
			c.LogFormat = "json"
		}
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		errs = append(errs, fmt.Errorf("--log-format must be json or text, got %q", c.LogFormat))
	}
	return c, errors.Join(errs...)
}

// isSecret reports whether flag name holds a credential (SecretVar).
func isSecret(fs *flag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	_, ok := f.Value.(*secretValue)
	return ok
}
