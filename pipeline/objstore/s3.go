package objstore

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	gcaws "gocloud.dev/aws"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
)

// openS3 opens an s3:// bucket as gocloud.dev's s3blob.URLOpener does, with
// the same URL parameters (its own: ssetype, kmskeyid, accelerate,
// use_path_style, s3ForcePathStyle, disable_https; the rest go to the AWS
// configuration: region, endpoint, profile, response_checksum_validation,
// …), and one difference: the client does not log "Response has no
// supported checksum" for every GET from a server that sends no checksum
// header (many S3-compatible servers). Responses that carry a checksum are
// still validated, and a mismatch is still an error; shard files and ledger
// segments are checked against their SHA-256 in any case.
func openS3(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	q := u.Query()
	var bo s3blob.Options
	if v := q.Get("ssetype"); v != "" {
		q.Del("ssetype")
		found := false
		for _, t := range types.ServerSideEncryptionAes256.Values() {
			if strings.EqualFold(string(t), v) {
				bo.EncryptionType, found = t, true
			}
		}
		if !found {
			return nil, fmt.Errorf("%q is not a valid value for %q", v, "ssetype")
		}
	}
	if v := q.Get("kmskeyid"); v != "" {
		q.Del("kmskeyid")
		bo.KMSEncryptionID = v
	}
	opts := []func(*s3.Options){func(o *s3.Options) { o.DisableLogOutputChecksumValidationSkipped = true }}
	for _, key := range []string{"accelerate", "disable_https", "use_path_style", "s3ForcePathStyle"} {
		v := q.Get(key)
		if v == "" {
			continue
		}
		q.Del(key)
		on, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("invalid value for %q: %w", key, err)
		}
		switch key {
		case "accelerate":
			opts = append(opts, func(o *s3.Options) { o.UseAccelerate = on })
		case "disable_https":
			opts = append(opts, func(o *s3.Options) { o.EndpointOptions.DisableHTTPS = on })
		default:
			opts = append(opts, func(o *s3.Options) { o.UsePathStyle = on })
		}
	}
	cfg, err := gcaws.V2ConfigFromURLParams(ctx, q)
	if err != nil {
		return nil, err
	}
	client := s3.NewFromConfig(cfg, opts...)
	bo.RequestChecksumCalculation = cfg.RequestChecksumCalculation // as s3blob's opener does
	return s3blob.OpenBucket(ctx, client, u.Host, &bo)
}
