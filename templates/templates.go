// Package templates embeds the text templates for keepalived.conf,
// haproxy.cfg and the check scripts. They are parsed once, with sprig's
// function map and missingkey=error; all computing happens in Go.
package templates

import (
	"embed"
	"text/template"

	"github.com/Masterminds/sprig/v3"
)

//go:embed *.tmpl scripts/*
var files embed.FS

// Parsed holds every template, parsed at package init from the embedded
// files; a broken template fails every test at once.
var Parsed = template.Must(template.New("vipctl").
	Option("missingkey=error").
	Funcs(sprig.TxtFuncMap()).
	ParseFS(files, "*.tmpl"))

// Script returns a check script's bytes. Scripts are static files, never
// rendered: nothing from the cluster file ever reaches a shell.
func Script(name string) ([]byte, error) {
	return files.ReadFile("scripts/" + name)
}
