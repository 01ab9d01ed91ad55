package kafkawire

// The Kafka API keys this package speaks.
const (
	KeyAPIVersions                int16 = 18
	KeyInitializeShareGroupState  int16 = 83
	KeyReadShareGroupState        int16 = 84
	KeyWriteShareGroupState       int16 = 85
	KeyDeleteShareGroupState      int16 = 86
	KeyReadShareGroupStateSummary int16 = 87
)

// API is a Kafka API with the range of versions the sidecar serves and the client sends.
type API struct {
	Key        int16
	MinVersion int16
	MaxVersion int16
}

// APIs are the APIs the sidecar serves, in key order. ApiVersions stops at v4, where Kafka 4.1–4.3
// stop: a client asking for more is answered with the v0 fallback (KIP-511) and retries at v4.
// Write v1 and ReadSummary v1 carry the delivery-complete count (KIP-1226, Kafka 4.2).
var APIs = []API{
	{Key: KeyAPIVersions, MinVersion: 0, MaxVersion: 4},
	{Key: KeyInitializeShareGroupState, MinVersion: 0, MaxVersion: 0},
	{Key: KeyReadShareGroupState, MinVersion: 0, MaxVersion: 0},
	{Key: KeyWriteShareGroupState, MinVersion: 0, MaxVersion: 1},
	{Key: KeyDeleteShareGroupState, MinVersion: 0, MaxVersion: 0},
	{Key: KeyReadShareGroupStateSummary, MinVersion: 0, MaxVersion: 1},
}

// LookupAPI returns the API of a key, if this package speaks it.
func LookupAPI(key int16) (API, bool) {
	for _, a := range APIs {
		if a.Key == key {
			return a, true
		}
	}
	return API{}, false
}

// Supports reports whether version is within the API's range.
func (a API) Supports(version int16) bool {
	return version >= a.MinVersion && version <= a.MaxVersion
}
