package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Settings is what the parser knows of one kind's settings mapping,
// derived once from a described struct (NewSettings): its keys, its part of
// dnsd.schema.json, its defaults and the decoding of its plain fields.
//
// Each field of the struct tagged `dnsd:"key"` is one key of the mapping.
// Its other tags describe it:
//
//	doc:"..."          the key's description (schema, docs)
//	default:"..."      the value when the key is not written (a list: items
//	                   separated by commas); the zero value when absent
//	enum:"a,b,c"       a string that is one of these
//	min:"1" max:"99"   bounds of an integer (min defaults to 0)
//	dur:"positive"     a duration > 0; dur:"ttl": a whole number of seconds,
//	                   at most MaxTTL; dur:"ttl,max=1h": at most 1h; no dur
//	                   tag: any duration >= 0
//	pattern:"..."      the schema pattern of a string, or of a list's items
//	item:"..."         the description of a list's items
//	minitems:"1"       the schema's lowest number of items of a list
//
// and the dnsd tag's options after the key: file (a path resolved
// against dnsd.yaml's directory and checked readable when not ""),
// required (the schema requires the key). A field of struct type is a
// nested mapping described the same way. Fields without a dnsd tag are
// the kind's own (derived values the check hook fills in).
type Settings struct {
	typ      reflect.Type
	base     Schema
	fields   []*setting
	hooks    map[string]func(*Block, any)
	unlisted map[string]func(*Block, any)
	check    func(*Block, any)
	items    map[string]*Schema
}

// Description is the description of a kind's settings struct T beyond its
// field tags: the mapping's own schema parts, and the kind's hooks.
type Description[T any] struct {
	// Schema gives the mapping's description and type and any rule
	// across keys (anyOf, dependentRequired); its properties are derived.
	// Zero: a mapping with no description.
	Schema Schema
	// Items are list item schemas built in code (patterns composed of
	// shared parts), by key; they take the place of item and pattern tags.
	// nil: every item schema from the tags.
	Items map[string]*Schema
	// Fields (nil: none) are per-key hooks: the key is read by its hook (checks
	// beyond its type: files, names, URLs) instead of plainly decoded.
	// The field's default and schema still come from its tags.
	Fields map[string]func(b *Block, c *T)
	// Unlisted are keys the parser accepts only to say something about
	// them (a key that must not be used); the schema has no such key.
	// nil: none.
	Unlisted map[string]func(b *Block, c *T)
	// Check runs after every key was read: rules across keys and checks
	// of the decoded values. nil: none.
	Check func(b *Block, c *T)
}

// setting is one key of a settings mapping.
type setting struct {
	key      string
	index    int
	kind     reflect.Kind // String, Bool, Int, Int64 (time.Duration), Slice, Struct
	dur      bool
	doc      string
	def      string
	hasDef   bool
	defVal   reflect.Value
	enum     []string
	lo, hi   int
	hasMax   bool
	durLim   DurLimit
	pattern  string
	item     string
	minItems int
	file     bool
	required bool
	nested   []*setting // kind Struct
}

var durationType = reflect.TypeFor[time.Duration]()

// NewSettings derives the Settings of a kind from its described struct T. A
// struct whose tags do not describe it is a programming error: NewSettings
// panics (every kind is built at start-up and by its tests).
func NewSettings[T any](d Description[T]) *Settings {
	typ := reflect.TypeFor[T]()
	fields, err := describeFields(typ)
	if err != nil {
		panic(fmt.Sprintf("config.NewSettings(%s): %v", typ, err))
	}
	s := &Settings{typ: typ, base: d.Schema, fields: fields, items: d.Items,
		hooks: map[string]func(*Block, any){}, unlisted: map[string]func(*Block, any){}}
	for key, h := range d.Fields {
		if s.field(key) == nil {
			panic(fmt.Sprintf("config.NewSettings(%s): hook for unknown key %q", typ, key))
		}
		s.hooks[key] = func(b *Block, v any) { h(b, v.(*T)) }
	}
	for _, f := range fields {
		if f.kind == reflect.Slice && typ.Field(f.index).Type.Elem().Kind() != reflect.String && d.Fields[f.key] == nil {
			panic(fmt.Sprintf("config.NewSettings(%s): key %q is a list of %s: it needs a hook", typ, f.key, typ.Field(f.index).Type.Elem()))
		}
	}
	for key, h := range d.Unlisted {
		s.unlisted[key] = func(b *Block, v any) { h(b, v.(*T)) }
	}
	if d.Check != nil {
		s.check = func(b *Block, v any) { d.Check(b, v.(*T)) }
	}
	return s
}

func (s *Settings) field(key string) *setting {
	for _, f := range s.fields {
		if f.key == key {
			return f
		}
	}
	return nil
}

func describeFields(typ reflect.Type) ([]*setting, error) {
	if typ.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%s is not a struct", typ)
	}
	var out []*setting
	for i := range typ.NumField() {
		sf := typ.Field(i)
		tag, ok := sf.Tag.Lookup("dnsd")
		if !ok {
			continue
		}
		if !sf.IsExported() {
			return nil, fmt.Errorf("field %s: a setting must be exported", sf.Name)
		}
		key, opts, _ := strings.Cut(tag, ",")
		f := &setting{key: key, index: i, kind: sf.Type.Kind(), doc: sf.Tag.Get("doc"), pattern: sf.Tag.Get("pattern"), item: sf.Tag.Get("item")}
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "":
			case "file":
				f.file = true
			case "required":
				f.required = true
			default:
				return nil, fmt.Errorf("field %s: unknown dnsd option %q", sf.Name, o)
			}
		}
		if err := f.describe(sf); err != nil {
			return nil, fmt.Errorf("field %s: %w", sf.Name, err)
		}
		out = append(out, f)
	}
	return out, nil
}

// describe reads the tags of one field that depend on its type.
func (f *setting) describe(sf reflect.StructField) error {
	f.def, f.hasDef = sf.Tag.Lookup("default")
	f.defVal = reflect.New(sf.Type).Elem()
	var err error
	switch {
	case sf.Type == durationType:
		f.dur = true
		if err = f.durLimit(sf.Tag.Get("dur")); err == nil && f.hasDef {
			var d time.Duration
			d, err = time.ParseDuration(f.def)
			f.defVal.SetInt(int64(d))
		}
	case f.kind == reflect.String:
		if e, ok := sf.Tag.Lookup("enum"); ok {
			f.enum = strings.Split(e, ",")
		}
		f.defVal.SetString(f.def)
	case f.kind == reflect.Bool:
		if f.hasDef {
			var b bool
			b, err = strconv.ParseBool(f.def)
			f.defVal.SetBool(b)
		}
	case f.kind == reflect.Int:
		f.hi = MaxInt
		if v, ok := sf.Tag.Lookup("min"); ok {
			f.lo, err = strconv.Atoi(v)
		}
		if v, ok := sf.Tag.Lookup("max"); ok && err == nil {
			f.hi, err = strconv.Atoi(v)
			f.hasMax = true
		}
		if f.hasDef && err == nil {
			var n int
			n, err = strconv.Atoi(f.def)
			f.defVal.SetInt(int64(n))
		}
	case f.kind == reflect.Slice:
		if v, ok := sf.Tag.Lookup("minitems"); ok {
			f.minItems, err = strconv.Atoi(v)
		}
		if f.hasDef {
			if sf.Type.Elem().Kind() != reflect.String {
				return fmt.Errorf("a default is only for a list of strings")
			}
			f.defVal = reflect.ValueOf(strings.Split(f.def, ","))
		}
	case f.kind == reflect.Struct:
		f.nested, err = describeFields(sf.Type)
	default:
		return fmt.Errorf("type %s is not a setting type", sf.Type)
	}
	return err
}

// durLimit reads a dur tag.
func (f *setting) durLimit(tag string) error {
	for _, o := range strings.Split(tag, ",") {
		switch {
		case o == "":
		case o == "positive":
			f.durLim = Positive
		case o == "ttl":
			f.durLim = DurLimit{Max: MaxTTL, Seconds: true}
		case strings.HasPrefix(o, "max="):
			d, err := time.ParseDuration(o[len("max="):])
			if err != nil {
				return err
			}
			f.durLim.Max = d
		default:
			return fmt.Errorf("unknown dur option %q", o)
		}
	}
	return nil
}

// Keys are the keys the settings mapping accepts (without fallthrough,
// which the parser reads for every kind).
func (s *Settings) Keys() []string {
	keys := make([]string, 0, len(s.fields)+len(s.unlisted))
	for _, f := range s.fields {
		keys = append(keys, f.key)
	}
	for key := range s.unlisted {
		keys = append(keys, key)
	}
	return keys
}

// New returns a new settings value (a *T) with every default applied.
func (s *Settings) New() any {
	v := reflect.New(s.typ)
	setDefaults(v.Elem(), s.fields)
	return v.Interface()
}

func setDefaults(v reflect.Value, fields []*setting) {
	for _, f := range fields {
		fv := v.Field(f.index)
		switch {
		case f.kind == reflect.Struct:
			setDefaults(fv, f.nested)
		case f.kind == reflect.Slice && f.hasDef:
			fv.Set(reflect.ValueOf(slices.Clone(f.defVal.Interface().([]string))))
		default:
			fv.Set(f.defVal)
		}
	}
}

// Parse reads one source's settings mapping: defaults, then every key
// in the struct's order (by its hook or plainly), the unlisted keys, and
// the check hook. Every problem is reported through b.
func (s *Settings) Parse(b *Block) any {
	v := s.New()
	rv := reflect.ValueOf(v).Elem()
	for _, f := range s.fields {
		if h, ok := s.hooks[f.key]; ok {
			h(b, v)
			continue
		}
		b.decode(b.Mapping, f, rv.Field(f.index))
	}
	for _, key := range sorted(s.Keys()) {
		if h, ok := s.unlisted[key]; ok && b.Has(key) {
			h(b, v)
		}
	}
	if s.check != nil {
		s.check(b, v)
	}
	return v
}

// decode reads one plain key of m into dst.
func (b *Block) decode(m *Mapping, f *setting, dst reflect.Value) {
	switch {
	case f.dur:
		d := time.Duration(dst.Int())
		m.Duration(f.key, &d, f.durLim)
		dst.SetInt(int64(d))
	case f.kind == reflect.String:
		str := dst.String()
		switch {
		case f.file:
			m.OptFile(f.key, &str)
		case f.enum != nil:
			m.Enum(f.key, &str, f.enum...)
		default:
			m.Str(f.key, &str)
		}
		dst.SetString(str)
	case f.kind == reflect.Bool:
		v := dst.Bool()
		m.Bool(f.key, &v)
		dst.SetBool(v)
	case f.kind == reflect.Int:
		n := int(dst.Int())
		m.Int(f.key, &n, f.lo, f.hi)
		dst.SetInt(int64(n))
	case f.kind == reflect.Slice:
		if vals, _, _, present := m.Strings(f.key); present {
			dst.Set(reflect.ValueOf(vals))
		}
	case f.kind == reflect.Struct:
		if !m.Has(f.key) {
			return
		}
		n, path := m.Get(f.key)
		sub := b.Parser.Mapping(n, path, settingKeys(f.nested)...)
		if sub == nil {
			return
		}
		if b.subs == nil {
			b.subs = map[string]*Mapping{}
		}
		b.subs[f.key] = sub
		for _, nf := range f.nested {
			b.decode(sub, nf, dst.Field(nf.index))
		}
	}
}

func settingKeys(fields []*setting) []string {
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	return keys
}

// Sub returns the checked mapping of a nested settings key (a field of
// struct type), nil when the key was not written or is not a mapping.
func (b *Block) Sub(key string) *Mapping { return b.subs[key] }

// Schema describes the settings mapping for dnsd.schema.json; the
// fallthrough key is added by the caller.
func (s *Settings) Schema() *Schema {
	out := s.base
	out.Properties = s.properties(s.fields, "")
	out.AdditionalProperties = noOthers
	for _, f := range s.fields {
		if f.required {
			out.Required = append(slices.Clone(out.Required), f.key)
		}
	}
	return &out
}

func (s *Settings) properties(fields []*setting, prefix string) map[string]*Schema {
	props := make(map[string]*Schema, len(fields))
	for _, f := range fields {
		props[f.key] = s.propSchema(f, prefix)
	}
	return props
}

func (s *Settings) propSchema(f *setting, prefix string) *Schema {
	switch {
	case f.dur:
		return DurationSchema(f.doc, time.Duration(f.defVal.Int()))
	case f.kind == reflect.String && f.file:
		return FileSchema(f.doc)
	case f.kind == reflect.String && f.enum != nil:
		return EnumSchema(f.doc, f.def, f.enum...)
	case f.kind == reflect.String:
		sc := StringSchema(f.doc, f.def)
		sc.Pattern = f.pattern
		return sc
	case f.kind == reflect.Bool:
		return BoolSchema(f.doc, f.defVal.Bool())
	case f.kind == reflect.Int:
		var hi *int
		if f.hasMax {
			hi = Ptr(f.hi)
		}
		return IntSchema(f.doc, int(f.defVal.Int()), f.lo, hi)
	case f.kind == reflect.Slice:
		desc := f.doc
		if f.hasDef {
			var q []string
			for _, d := range strings.Split(f.def, ",") {
				q = append(q, strconv.Quote(d))
			}
			desc += " Default [" + strings.Join(q, ", ") + "]."
		}
		sc := &Schema{Description: desc, Type: TArray, Items: s.items[prefix+f.key]}
		if f.required {
			sc.Type = "array"
		}
		if f.minItems > 0 {
			sc.MinItems = Ptr(f.minItems)
		}
		if sc.Items == nil {
			if f.pattern != "" {
				sc.Items = PatternSchema(f.item, f.pattern)
			} else {
				sc.Items = StringSchema(f.item, "")
			}
		}
		return sc
	default: // reflect.Struct
		return ObjectSchema(f.doc, s.properties(f.nested, prefix+f.key+"."))
	}
}
