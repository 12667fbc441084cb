package main

import (
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

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
)

// output is -o. With no -o or -o wide, why and deaths print their text for
// people (internal/report). Every other format prints the records as the
// RunnerDeath objects they are kept as, in a RunnerDeathList, through
// kubectl's printers: a script reads the same versioned schema from both
// commands as from `kubectl get runnerdeaths`, and jsonpath, templates and
// custom columns address the fields the CRD documents.
type output struct {
	print *genericclioptions.PrintFlags
}

// The formats printed for people.
const wide = "wide"

const customColumnsPrefix = "custom-columns="

func newOutput(cmd *cobra.Command) *output {
	o := &output{print: genericclioptions.NewPrintFlags("")}
	o.print.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = "Output format. One of: (" + strings.Join(o.formats(), ", ") +
		"). Without -o, or with wide, the text for people; any other prints the records as RunnerDeath objects."
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return o.formats(), cobra.ShellCompDirectiveNoFileComp
	})
	return o
}

func (o *output) formats() []string {
	return append([]string{wide, strings.TrimSuffix(customColumnsPrefix, "=")}, o.print.AllowedFormats()...)
}

// human reports whether the text for people is asked for, and whether wide.
func (o *output) human() (bool, bool) {
	f := *o.print.OutputFormat
	return f == "" || f == wide, f == wide
}

// printer is the printer of the records for -o, or a usage error.
func (o *output) printer() (printers.ResourcePrinter, error) {
	f := *o.print.OutputFormat
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
	_, err := o.printer()
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
	if *o.print.OutputFormat == "name" {
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
