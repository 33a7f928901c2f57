package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The S3 actions of the roles' policies.
const (
	s3GetObject                  = "s3:GetObject" // GET and HEAD
	s3PutObject                  = "s3:PutObject" // every upload request, multipart included
	s3DeleteObject               = "s3:DeleteObject"
	s3AbortMultipartUpload       = "s3:AbortMultipartUpload"
	s3ListMultipartUploadParts   = "s3:ListMultipartUploadParts"
	s3ListBucket                 = "s3:ListBucket"
	s3ListBucketMultipartUploads = "s3:ListBucketMultipartUploads"
	s3GetBucketVersioning        = "s3:GetBucketVersioning"
)

// iamRole is what one role of docs/OPERATIONS.md ("IAM policies per role")
// may do to one dataset: the single source of the policy documented there
// and of the one TestRolePoliciesAllowTheirCommandsOnly gives its user.
type iamRole struct {
	name     string   // the role's name in OPERATIONS.md
	commands []string // the commands the role runs, as OPERATIONS.md lists them
	// objects are the actions allowed on keys of the dataset, each key
	// relative to the dataset's prefix, with IAM's * wildcard.
	objects []objectGrant
	// list are the prefixes, relative to the dataset's prefix, under which
	// s3:ListBucket is allowed (the s3:prefix condition).
	list []string
	// bucket are the actions allowed on the bucket itself.
	bucket []string
	// untested names the grants, as "action key" or "action" for one on
	// the bucket, that no command of TestRolePoliciesAllowTheirCommandsOnly
	// sends a request for, and why they are granted anyway.
	untested map[string]string
}

// objectGrant allows actions on the keys matching key.
type objectGrant struct {
	key     string
	actions []string
}

// iamRoles are the roles, in the order OPERATIONS.md gives them.
var iamRoles = []iamRole{
	{
		name:     "writer",
		commands: []string{"put", "put --into", "rollback"},
		objects: []objectGrant{
			{"_pointer", []string{s3GetObject, s3PutObject}},
			{"_gen/*", []string{s3GetObject, s3PutObject, s3DeleteObject, s3AbortMultipartUpload}},
			{"_intent/*", []string{s3GetObject, s3PutObject, s3DeleteObject}},
			{"_pin/*", []string{s3GetObject, s3PutObject, s3DeleteObject}},
			{"_tag/*", []string{s3GetObject}},
			{"_probe/*", []string{s3PutObject, s3DeleteObject}},
		},
		list:   []string{"_gen/*", "_intent/*", "_pin/*", "_tag/*"},
		bucket: []string{s3GetBucketVersioning},
		untested: map[string]string{
			s3AbortMultipartUpload + " _gen/*": "only an upload of more than 16 MiB that fails midway is aborted",
		},
	},
	{
		name:     "reader",
		commands: []string{"get", "ls", "cat", "sync"},
		objects: []objectGrant{
			{"_pointer", []string{s3GetObject}},
			{"_gen/*", []string{s3GetObject}},
			{"_pin/*", []string{s3GetObject}},
			{"_tag/*", []string{s3GetObject}},
		},
		list: []string{"_pin/*", "_tag/*"},
	},
	{
		name:     "collector",
		commands: []string{"gc"},
		objects: []objectGrant{
			{"_pointer", []string{s3GetObject, s3PutObject}},
			{"_gen/*/_manifest", []string{s3GetObject}},
			{"_gen/*", []string{s3DeleteObject, s3ListMultipartUploadParts, s3AbortMultipartUpload}},
			{"_intent/*", []string{s3DeleteObject}},
			{"_job/*", []string{s3DeleteObject}},
			{"_pin/*", []string{s3DeleteObject}},
			{"_tag/*", []string{s3GetObject}},
			{"_lease/gc", []string{s3GetObject, s3PutObject}},
			{"_lease/*/*", []string{s3GetObject, s3DeleteObject}},
		},
		list:   []string{"_gen/*", "_intent/*", "_job/*", "_lease/*", "_pin/*", "_tag/*"},
		bucket: []string{s3ListBucketMultipartUploads, s3GetBucketVersioning},
		untested: map[string]string{
			s3DeleteObject + " _lease/*/*": "only epochs of an epoch lock (package lease) older than an hour are deleted",
		},
	},
	{
		name:     "lease user",
		commands: []string{"run", "lease"},
		objects: []objectGrant{
			{"_lease/*", []string{s3GetObject, s3PutObject}},
			{"_probe/*", []string{s3PutObject, s3DeleteObject}},
		},
		bucket: []string{s3GetBucketVersioning},
	},
	{
		name:     "auditor",
		commands: []string{"log", "show", "diff", "verify", "gc --dry-run"},
		objects: []objectGrant{
			{"_pointer", []string{s3GetObject}},
			{"_gen/*", []string{s3GetObject}},
			{"_pin/*", []string{s3GetObject}},
			{"_tag/*", []string{s3GetObject}},
		},
		list: []string{"_gen/*", "_job/*", "_pin/*", "_tag/*"},
	},
}

// policy renders the role's IAM policy for the dataset at prefix (no
// trailing slash) of bucket: one statement per set of object actions, with
// the keys that set is allowed on, then ListBucket with its s3:prefix
// condition, then the bucket's own actions.
func (r iamRole) policy(bucket, prefix string) string {
	arn := "arn:aws:s3:::" + bucket
	var stmts []string
	var sets [][]string
	keys := map[string][]string{}
	for _, g := range r.objects {
		id := strings.Join(g.actions, " ")
		if _, ok := keys[id]; !ok {
			sets = append(sets, g.actions)
		}
		keys[id] = append(keys[id], arn+"/"+prefix+"/"+g.key)
	}
	for _, actions := range sets {
		stmts = append(stmts, statement(actions, keys[strings.Join(actions, " ")], ""))
	}
	if len(r.list) > 0 {
		var prefixes []string
		for _, p := range r.list {
			prefixes = append(prefixes, prefix+"/"+p)
		}
		stmts = append(stmts, statement([]string{s3ListBucket}, []string{arn},
			fmt.Sprintf(`{"StringLike": {"s3:prefix": %s}}`, jsonList(prefixes))))
	}
	if len(r.bucket) > 0 {
		stmts = append(stmts, statement(r.bucket, []string{arn}, ""))
	}
	return "{\n  \"Version\": \"2012-10-17\",\n  \"Statement\": [\n" + strings.Join(stmts, ",\n") + "\n  ]\n}\n"
}

// statement renders one Allow statement; a list of one is written as its
// element.
func statement(actions, resources []string, condition string) string {
	var b strings.Builder
	b.WriteString("    {\n      \"Effect\": \"Allow\",\n")
	fmt.Fprintf(&b, "      \"Action\": %s,\n", jsonList(actions))
	fmt.Fprintf(&b, "      \"Resource\": %s", jsonList(resources))
	if condition != "" {
		fmt.Fprintf(&b, ",\n      \"Condition\": %s", condition)
	}
	b.WriteString("\n    }")
	return b.String()
}

func jsonList(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		b, _ := json.Marshal(s)
		quoted[i] = string(b)
	}
	if len(quoted) == 1 {
		return quoted[0]
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// policyBlock matches a role's policy in OPERATIONS.md: a marker naming
// the role, then a JSON code block.
var policyBlock = regexp.MustCompile("(?s)<!-- policy: ([a-z ]+) -->\n```json\n(.*?)```\n")

// TestRolePoliciesDocumented: OPERATIONS.md shows, for a dataset at
// s3://BUCKET/daily, exactly the policy of each role that the roles' test
// gives its users, in the roles' order, and each is valid JSON; the text
// before it names the role's commands.
func TestRolePoliciesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "OPERATIONS.md"))
	require.NoError(t, err)
	var names []string
	from := 0
	for _, m := range policyBlock.FindAllStringSubmatchIndex(string(doc), -1) {
		name, block := string(doc[m[2]:m[3]]), string(doc[m[4]:m[5]])
		before := string(doc[from:m[0]])
		from = m[1]
		names = append(names, name)
		i := slices.IndexFunc(iamRoles, func(r iamRole) bool { return r.name == name })
		if !assert.GreaterOrEqual(t, i, 0, "OPERATIONS.md has a policy for %q, which is no role", name) {
			continue
		}
		for _, c := range iamRoles[i].commands {
			assert.Contains(t, before, "`"+c+"`", "OPERATIONS.md: the text before the policy of the %s names its command", name)
		}
		want := iamRoles[i].policy("BUCKET", "daily")
		require.True(t, json.Valid([]byte(want)), "the policy of %s is not JSON:\n%s", name, want)
		assert.Equal(t, want, block, "OPERATIONS.md: the policy of the %s, after <!-- policy: %s -->, is out of date; it is:\n%s", name, name, want)
	}
	var roles []string
	for _, r := range iamRoles {
		roles = append(roles, r.name)
	}
	assert.Equal(t, roles, names, "OPERATIONS.md documents one policy per role, in this order")
}
