package secrets

// Seal and OpenSealed expose the envelope to the tests.
var (
	Seal       = seal
	OpenSealed = open
	SecretAAD  = secretAAD
)
