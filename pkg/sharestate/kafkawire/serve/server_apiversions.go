package serve

import (
	"context"
	"regexp"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// softwarePattern is what Kafka requires of ApiVersions' client software name and version (v3+).
var softwarePattern = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// decodeAPIVersions answers ApiVersions. It needs no store, so its answer is ready at once; it still
// goes out in its turn behind the requests before it.
func decodeAPIVersions(version int16, body []byte) (kafkawire.Handler, error) {
	api, _ := kafkawire.LookupAPI(kafkawire.KeyAPIVersions)
	if !api.Supports(version) {
		// KIP-511: a version this server does not know is not decoded. The answer is v0, which every
		// client reads, with UNSUPPORTED_VERSION and the ApiVersions versions to retry with.
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.ErrorCode = int16(sharestate.ErrUnsupportedVersion)
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{apiKey(api)}
		return precomputed(resp, sharestate.ErrUnsupportedVersion), nil
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	if err := req.ReadFrom(body); err != nil {
		return nil, &refusal{reason: closedMalformed, api: kmsg.NameForKey(kafkawire.KeyAPIVersions),
			code: sharestate.ErrInvalidRequest, err: err}
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	if version >= 3 && !validSoftware(req) {
		resp.ErrorCode = int16(sharestate.ErrInvalidRequest)
		return precomputed(resp, sharestate.ErrInvalidRequest), nil
	}
	for _, a := range kafkawire.APIs {
		resp.ApiKeys = append(resp.ApiKeys, apiKey(a))
	}
	return precomputed(resp, sharestate.ErrNone), nil
}

// validSoftware reports whether ApiVersions names the client's software as Kafka requires (v3+).
func validSoftware(req *kmsg.ApiVersionsRequest) bool {
	return softwarePattern.MatchString(req.ClientSoftwareName) && softwarePattern.MatchString(req.ClientSoftwareVersion)
}

func apiKey(a kafkawire.API) kmsg.ApiVersionsResponseApiKey {
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MinVersion, k.MaxVersion = a.Key, a.MinVersion, a.MaxVersion
	return k
}

// precomputed serves a response computed in advance.
func precomputed(resp kmsg.Response, code sharestate.ErrorCode) kafkawire.Handler {
	return func(context.Context, sharestate.Store) (kmsg.Response, sharestate.ErrorCode) { return resp, code }
}
