package config

// Variable is a variable Load reads, as its field's tags declare it.
type Variable struct {
	Name, GoName                string
	Default, LocalDefault       string
	HasDefault, HasLocalDefault bool
	TrimRight, Rule             string
}

// Variables lists every variable Load reads, in Config's order.
func Variables() []Variable {
	var out []Variable
	for _, f := range fields() {
		out = append(out, Variable{Name: f.name, GoName: f.goName, Default: f.def, LocalDefault: f.local,
			HasDefault: f.hasDef, HasLocalDefault: f.hasLocal, TrimRight: f.trim, Rule: f.rule})
	}
	return out
}
