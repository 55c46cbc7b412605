// Package labels reads a labels file (vidfs mount --labels): each video's class, by its path
// relative to the source, for datasets that keep labels in a file rather than in class folders.
//
// A file is CSV, lines "path,label" with an optional header line "path,label", or JSON, an
// object {"path": "label", ...} or a list [{"path": ..., "label": ...}, ...] (other keys of a
// list's objects are ignored). JSON is told by the extension .json, or but for .csv by a first
// character (past spaces) of { or [. A label is a class name, a string. Read refuses a file with an error
// naming it, the line and the reason: CSV it cannot parse, an empty path or label, a path
// outside the source, a label with a line break (classes.txt lists one a line), a label that is
// not a JSON string, or a path named twice with different labels (twice with the same is fine).
package labels

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// File is a labels file read.
type File struct {
	Name    string   // the file's path, as given
	Classes []string // the distinct labels, sorted
	byPath  map[string]entry
}

// entry is a path's label and the line that gave it.
type entry struct {
	label string
	line  int
}

// Read reads and checks the labels file at name.
func Read(name string) (*File, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("labels file: %w", err)
	}
	f := &File{Name: name, byPath: map[string]entry{}}
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a byte order mark, as spreadsheets write
	trimmed, ext := bytes.TrimLeft(data, " \t\r\n"), strings.ToLower(filepath.Ext(name))
	if ext == ".json" || (ext != ".csv" && len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[')) {
		err = f.readJSON(data)
	} else {
		err = f.readCSV(data)
	}
	if err != nil {
		return nil, fmt.Errorf("labels file %s: %w", name, err)
	}
	if len(f.byPath) == 0 {
		return nil, fmt.Errorf("labels file %s: no labels in it", name)
	}
	interned := map[string]string{}
	for p, e := range f.byPath { // one string per class, however many videos have it
		if s, ok := interned[e.label]; ok {
			e.label = s
			f.byPath[p] = e
			continue
		}
		interned[e.label] = e.label
		f.Classes = append(f.Classes, e.label)
	}
	slices.Sort(f.Classes)
	return f, nil
}

// Label returns the label the file gives the video at p (relative to the source, with /
// separators), and whether it names it.
func (f *File) Label(p string) (string, bool) {
	e, ok := f.byPath[p]
	return e.label, ok
}

// Len is how many videos the file names.
func (f *File) Len() int { return len(f.byPath) }

// Paths yields every path the file names, in no order.
func (f *File) Paths() iter.Seq[string] {
	return func(yield func(string) bool) {
		for p := range f.byPath {
			if !yield(p) {
				return
			}
		}
	}
}

// add records that line gives the video at p label.
func (f *File) add(line int, p, label string) error {
	switch {
	case p == "":
		return fmt.Errorf("line %d: an empty path", line)
	case label == "":
		return fmt.Errorf("line %d: %s has an empty label", line, p)
	case strings.ContainsAny(label, "\r\n"):
		return fmt.Errorf("line %d: %s has a label with a line break (classes.txt lists one label a line)", line, p)
	}
	clean := path.Clean(strings.TrimPrefix(p, "./"))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("line %d: path %s: want a path relative to the source, as the mount lists videos", line, p)
	}
	if e, ok := f.byPath[clean]; ok {
		if e.label != label {
			return fmt.Errorf("line %d: %s labelled %q, but %q on line %d", line, p, label, e.label, e.line)
		}
		return nil
	}
	f.byPath[clean] = entry{label: label, line: line}
	return nil
}

// isHeader tells whether a CSV's first line of fields p and label names its two columns (path,
// label; video,class; id,template, ...) rather than giving a video and its label.
func isHeader(p, label string) bool {
	switch strings.ToLower(p) {
	case "path", "video", "file", "filename", "name", "id", "video_id", "youtube_id":
	default:
		return false
	}
	switch strings.ToLower(label) {
	case "label", "class", "class_name", "category", "template":
		return true
	}
	return false
}

// readCSV reads lines "path,label", the first of which may be a header naming the columns
// (isHeader).
func (f *File) readCSV(data []byte) error {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = 2
	r.ReuseRecord = true
	for first := true; ; first = false {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			switch {
			case errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount):
				return fmt.Errorf("line %d: %d fields, want 2 (path,label)", pe.StartLine, len(rec))
			case errors.As(err, &pe):
				return fmt.Errorf("line %d, column %d: %w", pe.Line, pe.Column, pe.Err)
			}
			return err
		}
		p, label := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
		if first && isHeader(p, label) {
			continue
		}
		line, _ := r.FieldPos(0)
		if err := f.add(line, p, label); err != nil {
			return err
		}
	}
}

// readJSON reads an object {"path": "label", ...} or a list [{"path": ..., "label": ...}, ...].
func (f *File) readJSON(data []byte) error {
	d := json.NewDecoder(bytes.NewReader(data))
	// lineAt is the line of the first character at or after offset that is not a space.
	lineAt := func(off int64) int {
		for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
			off++
		}
		return 1 + bytes.Count(data[:off], []byte("\n"))
	}
	syntax := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fmt.Errorf("line %d: %w", 1+bytes.Count(data[:min(se.Offset, int64(len(data)))], []byte("\n")), err)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("line %d: the JSON ends early", lineAt(int64(len(data))))
		}
		return err
	}
	tok, err := d.Token()
	if err != nil {
		return syntax(err)
	}
	switch tok {
	case json.Delim('{'):
		for d.More() {
			line := lineAt(d.InputOffset())
			key, err := d.Token()
			if err != nil {
				return syntax(err)
			}
			var label any
			if err := d.Decode(&label); err != nil {
				return syntax(err)
			}
			s, ok := label.(string)
			if !ok {
				return fmt.Errorf("line %d: %s has a label of %s, want a string (a class name)", line, key, kindOf(label))
			}
			if err := f.add(line, strings.TrimSpace(key.(string)), strings.TrimSpace(s)); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for i := 0; d.More(); i++ {
			line := lineAt(d.InputOffset())
			var item map[string]any
			if err := d.Decode(&item); err != nil {
				var te *json.UnmarshalTypeError
				if errors.As(err, &te) {
					return fmt.Errorf("line %d: item %d is not an object {\"path\": ..., \"label\": ...}", line, i)
				}
				return syntax(err)
			}
			p, okPath := item["path"].(string)
			label, okLabel := item["label"].(string)
			switch {
			case !okPath:
				return fmt.Errorf("line %d: item %d has no \"path\" string", line, i)
			case !okLabel && item["label"] == nil:
				return fmt.Errorf("line %d: %s has no \"label\"", line, p)
			case !okLabel:
				return fmt.Errorf("line %d: %s has a label of %s, want a string (a class name)", line, p, kindOf(item["label"]))
			}
			if err := f.add(line, strings.TrimSpace(p), strings.TrimSpace(label)); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("line %d: want an object {\"path\": \"label\", ...} or a list [{\"path\": ..., \"label\": ...}, ...]", lineAt(0))
	}
	if _, err := d.Token(); err != nil { // the closing } or ]
		return syntax(err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("line %d: more after the JSON's end", lineAt(d.InputOffset()))
	}
	return nil
}

// kindOf names a JSON value's type, for messages.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case float64:
		return "a number"
	case bool:
		return "true or false"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
