package fakevm

import (
	"fmt"
	"strings"
)

// argSpec describes one --name argument, as Firecracker's utils/arg_parser
// does for both the firecracker and the jailer binaries.
type argSpec struct {
	name     string
	value    bool   // takes a value (--name VALUE; there is no --name=VALUE form)
	multiple bool   // may repeat (implies value)
	required bool   // must be given
	def      string // default value
	requires string // another argument this one needs
	help     string
}

// argErr is an argument error, with arg_parser's texts.
type argErr struct{ msg string }

func (e *argErr) Error() string { return e.msg }

// parsedArgs holds the parsed arguments.
type parsedArgs struct {
	single map[string]string
	multi  map[string][]string
	flags  map[string]bool
	// extra are the arguments after "--".
	extra []string
	// help and version are set when --help (-h) or --version was given;
	// the other arguments are then not checked.
	help, version bool
}

// parseArgs parses args (without the program name) against specs.
func parseArgs(specs []argSpec, args []string) (*parsedArgs, error) {
	p := &parsedArgs{single: map[string]string{}, multi: map[string][]string{}, flags: map[string]bool{}}
	if i := indexOf(args, "--"); i >= 0 {
		args, p.extra = args[:i], args[i+1:]
	}
	for _, a := range args {
		switch a {
		case "--help", "-h":
			p.help = true
			return p, nil
		case "--version":
			p.version = true
			return p, nil
		}
	}
	byName := map[string]argSpec{}
	for _, s := range specs {
		byName[s.name] = s
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			return nil, &argErr{fmt.Sprintf("Found argument '%s' which wasn't expected, or isn't valid in this context.", a)}
		}
		s, ok := byName[name]
		if !ok {
			return nil, &argErr{fmt.Sprintf("Found argument '%s' which wasn't expected, or isn't valid in this context.", name)}
		}
		_, seen := p.single[name]
		if !s.multiple && (seen || p.flags[name]) {
			return nil, &argErr{fmt.Sprintf("The argument '%s' was provided more than once.", name)}
		}
		if !s.value && !s.multiple {
			p.flags[name] = true
			continue
		}
		if i+1 >= len(args) || strings.HasPrefix(args[i+1], "--") {
			return nil, &argErr{fmt.Sprintf("The argument '%s' requires a value, but none was supplied.", name)}
		}
		i++
		if s.multiple {
			p.multi[name] = append(p.multi[name], args[i])
		} else {
			p.single[name] = args[i]
		}
	}
	for _, s := range specs {
		_, given := p.single[s.name]
		given = given || p.flags[s.name] || len(p.multi[s.name]) > 0
		if s.required && !given {
			return nil, &argErr{fmt.Sprintf("Argument '%s' required, but not found.", s.name)}
		}
		if given && s.requires != "" && !contains(args, "--"+s.requires) {
			return nil, &argErr{fmt.Sprintf("Argument '%s' required, but not found.", s.requires)}
		}
		if !given && s.def != "" {
			p.single[s.name] = s.def
		}
	}
	return p, nil
}

// usage renders the arguments' help.
func usage(specs []argSpec) string {
	var b strings.Builder
	for _, s := range specs {
		n := "--" + s.name
		if s.value || s.multiple {
			n += " <" + s.name + ">"
		}
		fmt.Fprintf(&b, "  %-34s %s", n, s.help)
		if s.def != "" {
			fmt.Fprintf(&b, " [default: %s]", s.def)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func indexOf(args []string, s string) int {
	for i, a := range args {
		if a == s {
			return i
		}
	}
	return -1
}

func contains(args []string, s string) bool { return indexOf(args, s) >= 0 }
