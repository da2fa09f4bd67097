package policy

import (
	"sort"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// The variables' object types are declared to CEL by hand, with a getter
// per field, instead of through reflection: a field read is a type switch
// and a pointer dereference, and the checker rejects a misspelt field at
// load.

type field struct {
	t   *types.Type
	get func(any) any
	// set reports presence for has(); nil means "non-empty".
	set func(any) bool
}

type object struct {
	fields map[string]field
}

var (
	stringList = types.NewListType(types.StringType)
	dynMap     = types.NewMapType(types.StringType, types.DynType)
	stringMap  = types.NewMapType(types.StringType, types.StringType)
)

// Object type names, as CEL knows them.
const (
	typeIdentity = "extauthz.Identity"
	typeRequest  = "extauthz.Request"
	typeSource   = "extauthz.Source"
	typeMCP      = "extauthz.MCP"
	typeA2A      = "extauthz.A2A"
	typeLineage  = "extauthz.Lineage"
)

func str(get func(any) string) field {
	return field{t: types.StringType, get: func(o any) any { return types.String(get(o)) },
		set: func(o any) bool { return get(o) != "" }}
}

func strs(get func(any) []string) field {
	return field{t: stringList, get: func(o any) any { return get(o) },
		set: func(o any) bool { return len(get(o)) > 0 }}
}

var objects = map[string]object{
	typeIdentity: {fields: map[string]field{
		"issuer":    str(func(o any) string { return o.(*Identity).Issuer }),
		"subject":   str(func(o any) string { return o.(*Identity).Subject }),
		"session":   str(func(o any) string { return o.(*Identity).Session }),
		"client_id": str(func(o any) string { return o.(*Identity).ClientID }),
		"scopes":    strs(func(o any) []string { return o.(*Identity).Scopes }),
		"actors":    strs(func(o any) []string { return o.(*Identity).Actors }),
	}},
	typeRequest: {fields: map[string]field{
		"method": str(func(o any) string { return o.(*Request).Method }),
		"host":   str(func(o any) string { return o.(*Request).Host }),
		"path":   str(func(o any) string { return o.(*Request).Path }),
		"headers": {t: stringMap,
			get: func(o any) any {
				if h := o.(*Request).Headers; h != nil {
					return h
				}
				return emptyStringMap
			},
			set: func(o any) bool { return len(o.(*Request).Headers) > 0 }},
		"source": {t: types.NewObjectType(typeSource),
			get: func(o any) any { return &o.(*Request).Source },
			set: func(any) bool { return true }},
	}},
	typeSource: {fields: map[string]field{
		"principal": str(func(o any) string { return o.(*Source).Principal }),
		"address":   str(func(o any) string { return o.(*Source).Address }),
	}},
	typeMCP: {fields: map[string]field{
		"method":           str(func(o any) string { return o.(*MCP).Method }),
		"name":             str(func(o any) string { return o.(*MCP).Name }),
		"uri":              str(func(o any) string { return o.(*MCP).URI }),
		"protocol_version": str(func(o any) string { return o.(*MCP).ProtocolVersion }),
		"session":          str(func(o any) string { return o.(*MCP).Session }),
		"arguments": {t: dynMap,
			get: func(o any) any { return mcpArguments(o.(*MCP)) },
			set: func(o any) bool {
				m := o.(*MCP)
				return m.BodyComplete && m.Arguments != ""
			}},
		"annotations": {t: dynMap,
			get: func(o any) any {
				if a := o.(*MCP).Annotations; a != nil {
					return a
				}
				return emptyMap
			},
			set: func(o any) bool { return len(o.(*MCP).Annotations) > 0 }},
	}},
	typeA2A: {fields: map[string]field{
		"method":     str(func(o any) string { return o.(*A2A).Method }),
		"context_id": str(func(o any) string { return o.(*A2A).ContextID }),
		"task_id":    str(func(o any) string { return o.(*A2A).TaskID }),
		"skill":      str(func(o any) string { return o.(*A2A).Skill }),
		"tenant":     str(func(o any) string { return o.(*A2A).Tenant }),
	}},
	typeLineage: {fields: map[string]field{
		"root":   str(func(o any) string { return o.(*Lineage).Root }),
		"parent": str(func(o any) string { return o.(*Lineage).Parent }),
		"depth": {t: types.IntType,
			get: func(o any) any { return types.Int(o.(*Lineage).Depth) },
			set: func(o any) bool { return true }},
		"actors": strs(func(o any) []string { return o.(*Lineage).Actors }),
		"trusted": {t: types.BoolType,
			get: func(o any) any { return types.Bool(o.(*Lineage).Trusted) },
			set: func(o any) bool { return true }},
	}},
}

var emptyStringMap = map[string]string{}

// provider adds the object types above to CEL's registry.
type provider struct {
	*types.Registry
}

func (p provider) FindStructType(name string) (*types.Type, bool) {
	if _, ok := objects[name]; ok {
		return types.NewTypeTypeWithParam(types.NewObjectType(name)), true
	}
	return p.Registry.FindStructType(name)
}

func (p provider) FindStructFieldNames(name string) ([]string, bool) {
	o, ok := objects[name]
	if !ok {
		return p.Registry.FindStructFieldNames(name)
	}
	names := make([]string, 0, len(o.fields))
	for n := range o.fields {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, true
}

func (p provider) FindStructFieldType(name, fieldName string) (*types.FieldType, bool) {
	o, ok := objects[name]
	if !ok {
		return p.Registry.FindStructFieldType(name, fieldName)
	}
	f, ok := o.fields[fieldName]
	if !ok {
		return nil, false
	}
	get := f.get
	return &types.FieldType{
		Type:  f.t,
		IsSet: func(o any) bool { return validTarget(name, o) && f.set(o) },
		GetFrom: func(o any) (any, error) {
			if !validTarget(name, o) {
				return nil, errNotObject
			}
			v := get(o)
			if err, ok := v.(error); ok {
				return nil, err
			}
			return v, nil
		},
	}, true
}

// validTarget guards the getters' type assertions: the checker makes sure
// a field of T is only read from a T, but a value reaching a getter some
// other way must be an error, never a panic.
func validTarget(name string, o any) bool {
	switch o.(type) {
	case *Identity:
		return name == typeIdentity
	case *Request:
		return name == typeRequest
	case *Source:
		return name == typeSource
	case *MCP:
		return name == typeMCP
	case *A2A:
		return name == typeA2A
	case *Lineage:
		return name == typeLineage
	}
	return false
}

// NewValue refuses to build the service's objects in an expression: they
// describe the request, an expression cannot make one up.
func (p provider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := objects[name]; ok {
		return types.NewErr("%s cannot be constructed", name)
	}
	return p.Registry.NewValue(name, fields)
}
