package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/ini.v1"

	"github.com/commitptr/commitptr/store"
)

// A remote, in the config file, names a store location and how to reach
// it: one INI section each, as rclone's config has them.
//
//	[prod]
//	url = s3://bucket/datasets
//	endpoint = https://s3.eu-west-1.amazonaws.com
//	region = eu-west-1
//
// Then prod:daily means s3://bucket/datasets/daily, reached with the
// remote's settings, which become the URL's query parameters: a flag given
// on the command line or by PUBLISH_<FLAG> still wins over them.

// remoteKeys maps the keys a remote may set besides url, each named as
// its global flag, to the URL query parameter it becomes.
var remoteKeys = map[string]string{
	"endpoint":        "endpoint",
	"region":          "region",
	"profile":         "profile",
	"path-style":      "path_style",
	"connect-timeout": "connect_timeout",
	"timeout":         "timeout",
	"idle-timeout":    "idle_timeout",
	"sse":             "sse",
	"sse-kms-key-id":  "sse_kms_key_id",
	"storage-class":   "storage_class",
}

// remotes are the remotes of a config file, by name: the URL each stands
// for, with its settings as query parameters.
type remotes map[string]*url.URL

// defaultConfigPath is the config file read when --config is not given:
// publish/config under the user's config directory ($XDG_CONFIG_HOME, or
// ~/.config).
func defaultConfigPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "publish", "config")
}

// loadRemotes reads the config file at path. A missing file has no
// remotes, unless it was named (explicit): then it is an error. Every
// section must have a url, a URL of a known scheme, and only keys of
// remoteKeys.
func loadRemotes(path string, explicit bool) (remotes, error) {
	r := remotes{}
	if path == "" {
		return r, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return r, nil
	}
	if err != nil {
		return nil, usagef("config file: %v", err)
	}
	f, err := ini.LoadSources(ini.LoadOptions{}, b)
	if err != nil {
		return nil, usagef("config file %s: %v", path, err)
	}
	for _, sec := range f.Sections() {
		name := sec.Name()
		if name == ini.DefaultSection {
			if len(sec.Keys()) > 0 {
				return nil, usagef("config file %s: key %q is outside any [remote] section", path, sec.Keys()[0].Name())
			}
			continue
		}
		if err := checkRemoteName(name); err != nil {
			return nil, usagef("config file %s: %v", path, err)
		}
		raw := sec.Key("url").String()
		if raw == "" {
			return nil, usagef("config file %s: remote [%s] has no url", path, name)
		}
		u, err := remoteURL(raw)
		if err != nil {
			return nil, usagef("config file %s: remote [%s]: %v", path, name, err)
		}
		q := u.Query()
		for _, k := range sec.Keys() {
			if k.Name() == "url" {
				continue
			}
			param, ok := remoteKeys[k.Name()]
			if !ok {
				return nil, usagef("config file %s: remote [%s] has the unknown key %q (known: url, %s)", path, name, k.Name(), strings.Join(slices.Sorted(maps.Keys(remoteKeys)), ", "))
			}
			if !q.Has(param) {
				q.Set(param, k.String())
			}
		}
		u.RawQuery = q.Encode()
		r[name] = u
	}
	return r, nil
}

// checkRemoteName refuses a remote name that could not be told from a URL
// scheme or a path: letters, digits, '-' and '_', not a scheme's name.
func checkRemoteName(name string) error {
	if name == "" || strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) >= 0 {
		return fmt.Errorf("remote name [%s]: use letters, digits, - and _", name)
	}
	if slices.Contains(store.Schemes(), strings.ToLower(name)) {
		return fmt.Errorf("remote name [%s] is a URL scheme", name)
	}
	return nil
}

// remoteURL parses the url of a remote: a URL of a registered scheme.
func remoteURL(raw string) (*url.URL, error) {
	if !strings.Contains(raw, "://") {
		return nil, fmt.Errorf("url %q is not a URL such as s3://bucket/prefix", raw)
	}
	u, err := store.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(store.Schemes(), u.Scheme) {
		return nil, fmt.Errorf("url %q: unknown scheme %q (known: %s)", u.Redacted(), u.Scheme, strings.Join(store.Schemes(), ", "))
	}
	return u, nil
}

// remoteName returns the remote an argument names, as NAME:PATH, or "".
func remoteName(arg string) string {
	if strings.Contains(arg, "://") {
		return ""
	}
	first, _, _ := strings.Cut(arg, "/")
	name, _, ok := strings.Cut(first, ":")
	if !ok || checkRemoteName(name) != nil || (filepath.VolumeName(arg) != "" && len(name) == 1) {
		return ""
	}
	return name
}

// resolve returns the URL an argument NAME:PATH stands for: the remote's
// URL with PATH appended. An argument that names no remote of the file is
// returned as it is.
func (r remotes) resolve(arg string) string {
	name := remoteName(arg)
	base, ok := r[name]
	if name == "" || !ok {
		return arg
	}
	_, rest, _ := strings.Cut(arg, ":")
	u := *base
	if rest = strings.Trim(rest, "/"); rest != "" {
		u.Path = strings.TrimRight(u.Path, "/") + "/" + rest
	}
	return u.String()
}

// resolveRemotes rewrites, in place, each argument of cmd before "--"
// that names a remote of the config file into its URL. The config file
// is read only when an argument could name a remote. Shell completion
// sees the arguments as typed.
func (g *globalOptions) resolveRemotes(cmd *cobra.Command, args []string) error {
	if cmd.Name() == cobra.ShellCompRequestCmd {
		return nil
	}
	n := len(args)
	if d := cmd.ArgsLenAtDash(); d >= 0 {
		n = d
	}
	var r remotes
	for i, arg := range args[:n] {
		// serve names a bucket NAME=URL, and the URL may be a remote's.
		var bucket string
		if cmd.Name() == "serve" {
			if b, rest, ok := strings.Cut(arg, "="); ok && remoteName(rest) != "" {
				bucket, arg = b+"=", rest
			}
		}
		if remoteName(arg) == "" {
			continue
		}
		if r == nil {
			path, explicit := g.Config, g.Config != ""
			if !explicit {
				path = defaultConfigPath()
			}
			var err error
			if r, err = loadRemotes(path, explicit); err != nil {
				return err
			}
		}
		args[i] = bucket + r.resolve(arg)
	}
	return nil
}
