package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"
)

// applyConfigFile sets, from the file at path, each of flags that neither
// the command line nor the environment set: flag > env > file > default.
//
// altsrc applies the values with that precedence; the file is read here
// rather than by altsrc's loaders so that an unknown key (a typo) is an
// error instead of being ignored, a list may be written as one string, and
// a path is never fetched as a URL.
func applyConfigFile(c *cli.Context, path string, flags []cli.Flag) error {
	if path == "" {
		return nil
	}
	values, err := readConfigFile(path, flags)
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	if err := altsrc.ApplyInputSourceValues(c, altsrc.NewMapInputSource(path, values), flags); err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	return nil
}

// readConfigFile reads a TOML file, or a JSON object when the name ends in
// .json, whose keys are flag names, into the values altsrc expects.
func readConfigFile(path string, flags []cli.Flag) (map[any]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseConfig(b, strings.EqualFold(filepath.Ext(path), ".json"), flags)
}

// parseConfig decodes a config file's bytes, TOML or (isJSON) a JSON
// object, into the values altsrc expects for flags.
func parseConfig(b []byte, isJSON bool, flags []cli.Flag) (map[any]any, error) {
	var err error
	raw := map[string]any{}
	if isJSON {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("JSON: %w", err)
		}
		if dec.More() {
			return nil, errors.New("JSON: more than one value")
		}
	} else if _, err := toml.Decode(string(b), &raw); err != nil {
		return nil, fmt.Errorf("TOML: %w", err)
	}
	byName := map[string]cli.Flag{}
	for _, f := range flags {
		for _, n := range f.Names() {
			byName[n] = f
		}
	}
	out := make(map[any]any, len(raw))
	for k, v := range raw {
		f, ok := byName[k]
		if !ok {
			names := make([]string, 0, len(byName))
			for n, f := range byName {
				if _, err := configValue(f, nil); !errors.Is(err, errNotSettable) { // not the one-shot flags
					names = append(names, n)
				}
			}
			sort.Strings(names)
			return nil, fmt.Errorf("unknown key %q (the keys are the flag names: %s)", k, strings.Join(names, ", "))
		}
		if out[k], err = configValue(f, v); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	return out, nil
}

// configValue checks a decoded value against its flag's type and converts
// it to the type altsrc reads.
func configValue(f cli.Flag, v any) (any, error) {
	switch f.(type) {
	case *altsrc.StringFlag:
		if s, ok := v.(string); ok {
			return s, nil
		}
		return nil, fmt.Errorf("want a string, have %s", typeName(v))
	case *altsrc.BoolFlag:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, fmt.Errorf("want true or false, have %s", typeName(v))
	case *altsrc.IntFlag:
		switch n := v.(type) {
		case int64: // TOML
			return int(n), nil
		case json.Number:
			if i, err := n.Int64(); err == nil {
				return int(i), nil
			}
		}
		return nil, fmt.Errorf("want a whole number, have %s", typeName(v))
	case *altsrc.DurationFlag:
		if s, ok := v.(string); ok {
			if _, err := time.ParseDuration(s); err != nil {
				return nil, fmt.Errorf("want a duration such as \"30s\": %w", err)
			}
			return s, nil
		}
		return nil, fmt.Errorf("want a duration such as \"30s\", have %s", typeName(v))
	case *altsrc.StringSliceFlag:
		switch l := v.(type) {
		case string:
			return []any{l}, nil
		case []any:
			for _, e := range l {
				if _, ok := e.(string); !ok {
					return nil, fmt.Errorf("want a list of strings, have an element %s", typeName(e))
				}
			}
			return l, nil
		}
		return nil, fmt.Errorf("want a list of strings, have %s", typeName(v))
	}
	return nil, errNotSettable
}

// errNotSettable is configValue's answer for a flag a config file does not
// set (one given on the command line only).
var errNotSettable = errors.New("not settable from a config file")

func typeName(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case int64, json.Number, float64:
		return fmt.Sprintf("the number %v", v)
	case []any:
		return "a list"
	case map[string]any:
		return "a table"
	case nil:
		return "null"
	}
	return fmt.Sprintf("a %T", v)
}
