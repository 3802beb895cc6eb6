package console

// MaxGrantsListed is maxGrantsListed, for the external tests.
const MaxGrantsListed = maxGrantsListed
