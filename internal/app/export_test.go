package app

// SetExpiryNoticesPerWrite makes the expiry jobs write about n notices per
// transaction, so that a test sees a run span several transactions.
func SetExpiryNoticesPerWrite(a *App, n int) { a.expiryNoticesPerWrite = n }
