package corpus

import (
	"encoding/json"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"relay/protocol"
	"relay/realm/api"
)

// SchemaEntry is one schema of the payload catalogue.
type SchemaEntry struct {
	Name     string             `json:"schema_name"`
	Version  int                `json:"schema_version"`
	Schema   *jsonschema.Schema `json:"-"`
	resolved *jsonschema.Resolved
}

// catalogue is the initial payload schema catalogue: toastmachine.object
// version 1, a JSON object.
var catalogue = func() []*SchemaEntry {
	obj := &jsonschema.Schema{Type: "object"}
	res, err := obj.Resolve(nil)
	if err != nil {
		panic(err)
	}
	return []*SchemaEntry{{Name: "toastmachine.object", Version: 1, Schema: obj, resolved: res}}
}()

// checkSchema pairs schema_name with schema_version and validates the
// payload against the catalogue; a validated payload is marked so.
func (s *Service) checkSchema(in *writeIn, d *messageData) error {
	switch {
	case in.SchemaName == "" && in.SchemaVersion == nil:
		return nil
	case in.SchemaName == "" || in.SchemaVersion == nil:
		return invalid("Pair schema_name and schema_version.").With("field", "schema_name")
	}
	var known *SchemaEntry
	nameKnown := false
	for _, e := range catalogue {
		if e.Name == in.SchemaName {
			nameKnown = true
			if e.Version == *in.SchemaVersion {
				known = e
			}
		}
	}
	if !nameKnown {
		return protocol.Refusef(protocol.ReasonUnknownSchema, "schema_name %q is not in the catalogue.", in.SchemaName)
	}
	if known == nil {
		return protocol.Refusef(protocol.ReasonUnsupportedSchema, "%s has no version %d.", in.SchemaName, *in.SchemaVersion)
	}
	if d.Payload == nil {
		return protocol.Refusef(protocol.ReasonSchemaValidation, "A declared schema needs a payload to validate.")
	}
	var v any
	if err := json.Unmarshal([]byte(*d.Payload), &v); err != nil {
		return invalid("payload is not valid JSON.").With("field", "payload")
	}
	if err := known.resolved.Validate(v); err != nil {
		why := strings.TrimPrefix(err.Error(), "validating root: ")
		if t := known.Schema.Type; t != "" && api.TypeName(v) != t {
			why = "it must be a JSON " + t + ", not " + api.TypeName(v)
		}
		return protocol.Refusef(protocol.ReasonSchemaValidation, "The payload does not validate against %s v%d: %s.", known.Name, known.Version, why)
	}
	d.SchemaName, d.SchemaVersion, d.SchemaValidated = known.Name, known.Version, true
	return nil
}
