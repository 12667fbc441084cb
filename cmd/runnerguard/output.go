package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
)

// output is -o, one flag for every command that prints results: json and
// yaml everywhere, and no -o for the text for people.
//
// why and deaths print runnerguard's records (newOutput): every format
// other than the text prints them as the RunnerDeath objects they are
// kept as, in a RunnerDeathList, through kubectl's printers, so a script
// reads the same versioned schema as from `kubectl get runnerdeaths`, and
// jsonpath, templates and custom columns address the fields the CRD
// documents. The other commands print what is no Kubernetes object (check's
// findings, a drain's outcome, refusals, the version: newValueOutput): json
// or yaml of the structure, which kubectl's printers refuse for want of a
// kind.
type output struct {
	// print is kubectl's printers, for records; nil for a value.
	print *genericclioptions.PrintFlags
	// format is -o's value.
	format *string
	// wide: the text for people has a wider form.
	wide bool
}

// The formats printed for people.
const wide = "wide"

const customColumnsPrefix = "custom-columns="

// outputUsage is the start of -o's help on every command.
const outputUsage = "Output format. One of: ("

// newOutput is -o of a command that prints records.
func newOutput(cmd *cobra.Command) *output {
	o := &output{print: genericclioptions.NewPrintFlags(""), wide: true}
	o.print.AddFlags(cmd)
	o.format = o.print.OutputFormat
	o.describe(cmd, "Without -o, or with wide, the text for people; any other prints the records as RunnerDeath objects.")
	return o
}

// newValueOutput is -o of a command whose results are no Kubernetes
// object; wide when its text for people has a wider form.
func newValueOutput(cmd *cobra.Command, wide bool, what string) *output {
	o := &output{format: new(string), wide: wide}
	cmd.Flags().StringVarP(o.format, "output", "o", "", "")
	o.describe(cmd, "Without -o the text for people; json and yaml print "+what+".")
	return o
}

func (o *output) describe(cmd *cobra.Command, rest string) {
	cmd.Flags().Lookup("output").Usage = outputUsage + strings.Join(o.formats(), ", ") + "). " + rest
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return o.formats(), cobra.ShellCompDirectiveNoFileComp
	})
}

func (o *output) formats() []string {
	var f []string
	if o.wide {
		f = append(f, wide)
	}
	if o.print == nil {
		return append(f, "json", "yaml")
	}
	return append(append(f, strings.TrimSuffix(customColumnsPrefix, "=")), o.print.AllowedFormats()...)
}

// human reports whether the text for people is asked for, and whether wide.
func (o *output) human() (bool, bool) {
	f := *o.format
	return f == "" || f == wide && o.wide, f == wide && o.wide
}

// printer is the printer of the records for -o, or a usage error.
func (o *output) printer() (printers.ResourcePrinter, error) {
	f := *o.format
	if spec, ok := strings.CutPrefix(f, customColumnsPrefix); ok {
		p, err := newCustomColumns(spec)
		if err != nil {
			return nil, usageErrorf("-o %s: %v", f, err)
		}
		return p, nil
	}
	if f == strings.TrimSuffix(customColumnsPrefix, "=") {
		return nil, usageErrorf("-o custom-columns needs its columns: -o custom-columns=POD:.record.pod,CLASS:.record.class")
	}
	s, err := scheme()
	if err != nil {
		return nil, err
	}
	p, err := o.print.WithTypeSetter(s).ToPrinter()
	if err != nil {
		return nil, usageErrorf("-o %s: %v (and wide, custom-columns=...)", f, err)
	}
	return p, nil
}

// validate refuses an unknown -o before anything is read.
func (o *output) validate() error {
	if h, _ := o.human(); h {
		return nil
	}
	if o.print == nil {
		if f := *o.format; f != "json" && f != "yaml" {
			return usageErrorf("-o %q: one of %s", f, strings.Join(o.formats(), ", "))
		}
		return nil
	}
	_, err := o.printer()
	return err
}

// printValue prints v as -o's json or yaml, through its json tags either
// way, as kubectl prints an object.
func (o *output) printValue(w io.Writer, v any) error {
	var b []byte
	var err error
	if *o.format == "yaml" {
		b, err = yaml.Marshal(v)
	} else {
		b, err = json.MarshalIndent(v, "", "    ")
		b = append(b, '\n')
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// printRecords prints records as a RunnerDeathList.
func (o *output) printRecords(w io.Writer, records []death.Record) error {
	p, err := o.printer()
	if err != nil {
		return err
	}
	// No record prints as an empty list, as kubectl prints one.
	list := &v1alpha1.RunnerDeathList{Items: []v1alpha1.RunnerDeath{}}
	for _, r := range records {
		obj := r.Object()
		obj.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("RunnerDeath"))
		list.Items = append(list.Items, *obj)
	}
	if *o.format == "name" {
		// kubectl's name printer takes one object at a time.
		for i := range list.Items {
			if err := p.PrintObj(&list.Items[i], w); err != nil {
				return err
			}
		}
		return nil
	}
	return p.PrintObj(list, w)
}

// customColumns is -o custom-columns=HEADER:JSONPATH,...: one row per
// record, as kubectl get prints it. kubectl's own printer lives in
// k8s.io/kubectl/pkg/cmd/get, whose imports would put kubectl's whole
// command framework into the webhook server's binary; this one uses the
// same JSONPath library and path syntax.
type customColumns struct {
	headers []string
	paths   []*jsonpath.JSONPath
}

// relaxedPath accepts a column's path as kubectl does: a.b, .a.b, {a.b} or
// {.a.b}.
var relaxedPath = regexp.MustCompile(`^\{\.?([^{}]+)\}$|^\.?([^{}]+)$`)

func newCustomColumns(spec string) (*customColumns, error) {
	if spec == "" {
		return nil, fmt.Errorf("no columns given")
	}
	c := &customColumns{}
	for col := range strings.SplitSeq(spec, ",") {
		header, path, ok := strings.Cut(col, ":")
		m := relaxedPath.FindStringSubmatch(path)
		if !ok || header == "" || m == nil {
			return nil, fmt.Errorf("column %q: want HEADER:JSONPATH, such as CLASS:.record.class", col)
		}
		jp := jsonpath.New(header).AllowMissingKeys(true)
		if err := jp.Parse("{." + m[1] + m[2] + "}"); err != nil {
			return nil, fmt.Errorf("column %q: %w", col, err)
		}
		c.headers, c.paths = append(c.headers, header), append(c.paths, jp)
	}
	return c, nil
}

func (c *customColumns) PrintObj(obj runtime.Object, w io.Writer) error {
	list, ok := obj.(*v1alpha1.RunnerDeathList)
	if !ok {
		return fmt.Errorf("custom columns print a RunnerDeathList, not %T", obj)
	}
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, strings.Join(c.headers, "\t"))
	for i := range list.Items {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&list.Items[i])
		if err != nil {
			return err
		}
		cells := make([]string, len(c.paths))
		for j, jp := range c.paths {
			results, err := jp.FindResults(u)
			if err != nil {
				return err
			}
			var values []string
			for _, rs := range results {
				for _, v := range rs {
					values = append(values, printers.EscapeTerminal(fmt.Sprint(jsonPathValue(v))))
				}
			}
			cells[j] = strings.Join(values, ",")
			if cells[j] == "" {
				cells[j] = "<none>"
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// jsonPathValue is a JSONPath result's value (an interface in an unstructured
// object holds it).
func jsonPathValue(v reflect.Value) any {
	if v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	return v.Interface()
}
