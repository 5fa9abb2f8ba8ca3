package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	gcaws "gocloud.dev/aws"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
)

// bucketStore is an S3-compatible bucket through gocloud.dev/blob, which
// does ranged GETs, multipart uploads (the AWS SDK's upload manager) and
// the SDK's retries with backoff.
type bucketStore struct {
	b    *blob.Bucket
	name string // s3://bucket/prefix?endpoint=..., for messages
}

// openS3 opens s3://bucket/prefix?endpoint=URL&region=REGION. The query
// takes gocloud.dev's S3 parameters (endpoint, region, profile,
// use_path_style, disable_https, ...); with an endpoint and no
// use_path_style, path-style addressing is used, as MinIO, SeaweedFS and
// most S3-compatible servers want.
func openS3(ctx context.Context, u *url.URL) (Store, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("store URL %s: no bucket", u.Redacted())
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		prefix += "/"
		if err := checkKey(prefix, true); err != nil {
			return nil, fmt.Errorf("store URL %s: %w", u.Redacted(), err)
		}
	}
	q := u.Query()
	if q.Get("endpoint") != "" && q.Get("use_path_style") == "" && q.Get("s3ForcePathStyle") == "" {
		q.Set("use_path_style", "true")
	}
	b, err := openS3Bucket(ctx, u.Host, q)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", u.Redacted(), err)
	}
	if prefix != "" {
		b = blob.PrefixedBucket(b, prefix)
	}
	name := (&url.URL{Scheme: "s3", Host: u.Host, Path: u.Path, RawQuery: u.RawQuery}).Redacted()
	return &bucketStore{b: b, name: name}, nil
}

// ObjectContentType is the Content-Type of every object the S3 store
// puts, the parts of a multipart upload included: strata's own binary
// formats, which no server should transform. Not application/octet-stream
// (nor no type at all): SeaweedFS takes that for "unknown" and gzips each
// 4MiB chunk whose first bytes look like text (a pack's string column
// often does), then decompresses the whole chunk for every ranged GET
// that touches it, which made a cold read of such a pack several times
// slower than of the others. A type of its own is left as it is.
const ObjectContentType = "application/vnd.strata"

// openS3Bucket opens bucket with the S3 parameters of q, as gocloud's
// s3blob.URLOpener does (the same parameters, the same client), except
// that its client gives UploadPart requests ObjectContentType: the SDK
// sends application/octet-stream on them whatever the object's type, and
// gocloud offers no way to change it.
func openS3Bucket(ctx context.Context, bucket string, q url.Values) (*blob.Bucket, error) {
	var opts s3blob.Options
	clientOpts := []func(*s3.Options){partContentType}
	if v := q.Get("ssetype"); v != "" {
		q.Del("ssetype")
		found := false
		for _, t := range types.ServerSideEncryptionAes256.Values() {
			if strings.EqualFold(string(t), v) {
				opts.EncryptionType, found = t, true
			}
		}
		if !found {
			return nil, fmt.Errorf("%q is not a valid value for %q", v, "ssetype")
		}
	}
	if v := q.Get("kmskeyid"); v != "" {
		q.Del("kmskeyid")
		opts.KMSEncryptionID = v
	}
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
			clientOpts = append(clientOpts, func(o *s3.Options) { o.UseAccelerate = on })
		case "disable_https":
			clientOpts = append(clientOpts, func(o *s3.Options) { o.EndpointOptions.DisableHTTPS = on })
		default:
			clientOpts = append(clientOpts, func(o *s3.Options) { o.UsePathStyle = on })
		}
	}
	cfg, err := gcaws.V2ConfigFromURLParams(ctx, q)
	if err != nil {
		return nil, err
	}
	// As s3blob's opener: its uploads take the checksum setting from
	// here, not from the client.
	opts.RequestChecksumCalculation = cfg.RequestChecksumCalculation
	return s3blob.OpenBucket(ctx, s3.NewFromConfig(cfg, clientOpts...), bucket, &opts)
}

// partContentType sets the Content-Type of UploadPart requests to
// ObjectContentType, before they are signed.
func partContentType(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Build.Add(middleware.BuildMiddlewareFunc("StrataPartContentType",
			func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				if req, ok := in.Request.(*smithyhttp.Request); ok && middleware.GetOperationName(ctx) == "UploadPart" {
					req.Header.Set("Content-Type", ObjectContentType)
				}
				return next.HandleBuild(ctx, in)
			}), middleware.After)
	})
}

func (s *bucketStore) String() string { return s.name }

func (s *bucketStore) Close() error { return s.b.Close() }

func (s *bucketStore) List(ctx context.Context, prefix string) ([]Object, error) {
	if err := checkKey(prefix, true); err != nil {
		return nil, fmt.Errorf("list %s: %w", s, err)
	}
	var objs []Object
	it := s.b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, s.wrap("list", prefix, err)
		}
		if o.IsDir {
			continue
		}
		objs = append(objs, Object{Key: o.Key, Size: o.Size, Modified: o.ModTime})
	}
	return objs, nil // S3 lists in key order
}

func (s *bucketStore) Stat(ctx context.Context, key string) (Object, error) {
	if err := checkKey(key, false); err != nil {
		return Object{}, fmt.Errorf("stat %s: %w", s, err)
	}
	a, err := s.b.Attributes(ctx, key)
	if err != nil {
		return Object{}, s.wrap("stat", key, err)
	}
	return Object{Key: key, Size: a.Size, Modified: a.ModTime}, nil
}

func (s *bucketStore) NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := checkKey(key, false); err != nil {
		return nil, fmt.Errorf("read %s: %w", s, err)
	}
	if offset < 0 {
		return nil, fmt.Errorf("read %s from %s: negative offset %d", key, s, offset)
	}
	r, err := s.b.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, s.wrap("read", key, err)
	}
	return &bucketReader{r: r, s: s, key: key}, nil
}

// bucketReader names the object in a read error.
type bucketReader struct {
	r   *blob.Reader
	s   *bucketStore
	key string
}

func (r *bucketReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = r.s.wrap("read", r.key, err)
	}
	return n, err
}

func (r *bucketReader) Close() error { return r.r.Close() }

func (s *bucketStore) Put(ctx context.Context, key, path string, opts PutOptions) error {
	if err := checkKey(key, false); err != nil {
		return fmt.Errorf("put %s: %w", s, err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("put %s in %s: %w", key, s, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && opts.Size == 0 {
		opts.Size = info.Size()
	}
	return s.PutReader(ctx, key, f, opts)
}

// The AWS SDK's multipart uploads: at most maxUploadParts parts, of
// defaultPartBytes unless the object's size needs larger ones.
const (
	maxUploadParts   = 10000
	defaultPartBytes = 8 << 20
)

func (s *bucketStore) PutReader(ctx context.Context, key string, r io.Reader, opts PutOptions) error {
	if err := checkKey(key, false); err != nil {
		return fmt.Errorf("put %s: %w", s, err)
	}
	// An error from r aborts the upload (a multipart one is aborted, a
	// single PUT never sent whole): no object appears.
	wo := &blob.WriterOptions{
		ContentType: ObjectContentType,
		IfNotExist:  opts.IfAbsent,
	}
	if n := opts.Size/maxUploadParts + 1; n > defaultPartBytes {
		wo.BufferSize = int(n)
	}
	err := s.b.Upload(ctx, key, r, wo)
	if err != nil {
		return s.wrap("put", key, err)
	}
	return nil
}

func (s *bucketStore) DeletePrefix(ctx context.Context, prefix string) error {
	if err := checkKey(prefix, true); err != nil || prefix == "" {
		if err == nil {
			err = fmt.Errorf("%w: empty prefix", ErrInvalidKey)
		}
		return fmt.Errorf("delete %s: %w", s, err)
	}
	objs, err := s.List(ctx, prefix)
	if err != nil {
		return err
	}
	// The manifest first: a container being deleted stops being a
	// committed one before its column files go.
	for i := len(objs) - 1; i >= 0; i-- {
		if err := s.b.Delete(ctx, objs[i].Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return s.wrap("delete", objs[i].Key, err)
		}
	}
	return nil
}

func (s *bucketStore) wrap(op, key string, err error) error {
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return fmt.Errorf("%s %s in %s: %w", op, key, s, ErrNotExist)
	case gcerrors.FailedPrecondition, gcerrors.AlreadyExists:
		return fmt.Errorf("%s %s in %s: %w", op, key, s, ErrExists)
	}
	return fmt.Errorf("%s %s in %s: %w", op, key, s, err)
}
