package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestIAMUserHasOnlyWhatItsPolicyAllows: a user of IAMS3 may send the
// requests its policy allows, on the resources it names, and ListBucket
// only under the prefixes its s3:prefix condition allows; a new policy
// applies at once. Root may do anything. Requests lists what the user
// sent, and how it was answered.
func TestIAMUserHasOnlyWhatItsPolicyAllows(t *testing.T) {
	srv := IAMS3(t)
	bucket := srv.NewBucket(t)
	ctx := context.Background()
	root := srv.Client()
	for _, key := range []string{"a/x", "b/x"} {
		_, err := root.PutObject(ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: aws.String(key), Body: strings.NewReader("x")})
		if err != nil {
			t.Fatalf("root: put %s: %v", key, err)
		}
	}
	getOnly := fmt.Sprintf(`{"Version": "2012-10-17", "Statement": [
		{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::%s/a/*"}]}`, bucket)
	u := srv.NewUser(t, "reader", []byte(getOnly))
	c := awss3.New(awss3.Options{
		BaseEndpoint: aws.String(srv.Endpoint), Region: srv.Region, UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(u.AccessKey, u.SecretKey, ""),
	})
	get := func(key string) error {
		out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bucket, Key: &key})
		if err == nil {
			out.Body.Close()
		}
		return err
	}
	list := func(prefix string) error {
		_, err := c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix})
		return err
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	denied := func(what string, err error) {
		t.Helper()
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDenied" {
			t.Errorf("%s: want AccessDenied, got %v", what, err)
		}
	}

	allowed("get a/x", get("a/x"))
	denied("get b/x", get("b/x"))
	denied("list a/", list("a/"))
	_, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: aws.String("a/y"), Body: strings.NewReader("y")})
	denied("put a/y", err)

	u.SetPolicy(t, fmt.Appendf(nil, `{"Version": "2012-10-17", "Statement": [
		{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::%[1]s/a/*"},
		{"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::%[1]s",
		 "Condition": {"StringLike": {"s3:prefix": ["a/*"]}}}]}`, bucket))
	allowed("list a/ once allowed", list("a/"))
	denied("list b/", list("b/"))
	denied("list without a prefix", list(""))

	_, err = root.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &bucket})
	allowed("root: list", err)

	want := []Request{
		{Op: "s3_GetObject", Bucket: bucket, Key: "a/x", Status: 200},
		{Op: "s3_GetObject", Bucket: bucket, Key: "b/x", Status: 403, Code: "AccessDenied"},
		{Op: "s3_ListObjectsV2", Bucket: bucket, Prefix: "a/", Status: 403, Code: "AccessDenied"},
		{Op: "s3_PutObject", Bucket: bucket, Key: "a/y", Status: 403, Code: "AccessDenied"},
		{Op: "s3_ListObjectsV2", Bucket: bucket, Prefix: "a/", Status: 200},
		{Op: "s3_ListObjectsV2", Bucket: bucket, Prefix: "b/", Status: 403, Code: "AccessDenied"},
		{Op: "s3_ListObjectsV2", Bucket: bucket, Status: 403, Code: "AccessDenied"},
	}
	if got := srv.Requests(t, u.AccessKey); !slices.Equal(got, want) {
		t.Errorf("the requests of %s:\n got %v\nwant %v", u.Name, got, want)
	}
}
