package store

import (
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Server-side encryption with keys the service manages (Encryption.SSE).
const (
	SSEAES256 = "AES256"  // S3-managed keys (SSE-S3)
	SSEKMS    = "aws:kms" // a KMS key (SSE-KMS)
)

// CustomerKeySize is the length of a customer key: AES-256.
const CustomerKeySize = 32

// Encryption is how a store asks the service to encrypt the objects it
// writes. The zero value leaves it to the bucket's default. A driver that
// cannot honour a setting refuses it when it opens, never ignores it.
type Encryption struct {
	// SSE is server-side encryption with keys the service manages:
	// SSEAES256, SSEKMS, or empty for the bucket's default.
	SSE string
	// KMSKeyID names the key of SSEKMS (on Cloud Storage, a Cloud KMS key
	// name); empty means the service's default KMS key.
	KMSKeyID string
	// CustomerKey, if set, is an AES-256 key of the caller's (S3 SSE-C,
	// Cloud Storage customer-supplied keys, Azure customer-provided keys).
	// The service encrypts with it and keeps only its hash, so every read
	// sends it too. It excludes SSE.
	CustomerKey []byte
}

// IsZero reports whether e asks for nothing.
func (e Encryption) IsZero() bool {
	return e.SSE == "" && e.KMSKeyID == "" && e.CustomerKey == nil
}

// Check refuses a setting that no service accepts.
func (e Encryption) Check() error {
	switch e.SSE {
	case "", SSEAES256, SSEKMS:
	default:
		return fmt.Errorf("store: unknown server-side encryption %q (want %s or %s)", e.SSE, SSEAES256, SSEKMS)
	}
	if e.KMSKeyID != "" && e.SSE != SSEKMS {
		return fmt.Errorf("store: a KMS key id needs server-side encryption %s", SSEKMS)
	}
	if e.CustomerKey != nil {
		if len(e.CustomerKey) != CustomerKeySize {
			return fmt.Errorf("store: a customer key is %d bytes (AES-256), not %d", CustomerKeySize, len(e.CustomerKey))
		}
		if e.SSE != "" {
			return fmt.Errorf("store: a customer key excludes server-side encryption %s", e.SSE)
		}
	}
	return nil
}

// CustomerKeyHeaders returns the key and its MD5, both in base64, as the
// S3 SSE-C headers carry them. ok is false without a customer key.
func (e Encryption) CustomerKeyHeaders() (key, keyMD5 string, ok bool) {
	if e.CustomerKey == nil {
		return "", "", false
	}
	sum := md5.Sum(e.CustomerKey)
	return base64.StdEncoding.EncodeToString(e.CustomerKey), base64.StdEncoding.EncodeToString(sum[:]), true
}

// String describes e without its customer key.
func (e Encryption) String() string {
	var parts []string
	if e.SSE != "" {
		parts = append(parts, "sse="+e.SSE)
	}
	if e.KMSKeyID != "" {
		parts = append(parts, "kms-key-id="+e.KMSKeyID)
	}
	if e.CustomerKey != nil {
		parts = append(parts, "customer key")
	}
	if len(parts) == 0 {
		return "bucket default"
	}
	return strings.Join(parts, ", ")
}

// ParseCustomerKey reads a customer key as a file or an environment
// variable holds it: 32 bytes, or their base64 (standard or URL
// encoding, padded or not), with surrounding white space ignored.
func ParseCustomerKey(b []byte) ([]byte, error) {
	if len(b) == CustomerKeySize {
		return b, nil
	}
	s := strings.TrimSpace(string(b))
	if len(s) == CustomerKeySize {
		return []byte(s), nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil && len(k) == CustomerKeySize {
			return k, nil
		}
	}
	return nil, errors.New("store: a customer key is 32 bytes or their base64")
}
