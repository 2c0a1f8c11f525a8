package eval

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxLabelLine bounds the length of one line of a labels file; anything
// longer is certainly not a label and more likely a binary or CSV file
// passed by mistake.
const maxLabelLine = 1 << 20

// ReadLabels reads one label per line from the file at path.
//
// If every label is a non-negative integer (1.0 and 1e3 are too) the values
// are used as they are, so cluster ids written by this tool read back
// unchanged. Otherwise
// each distinct string (such as "cat" or "-1") is given an id in order of
// first appearance; the metrics do not depend on which ids the labels get,
// only on which points share one.
//
// Surrounding white space is ignored and blank lines may end the file, but a
// blank line followed by a label is an error: it would shift every later
// label onto the wrong point. A missing value such as NA (MissingLabel) is -1, a
// point without a class that ScoreLabelled leaves out. Errors name the file and
// line, as in "labels.txt:7: empty label".
func ReadLabels(path string) ([]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read labels: %w", err)
	}
	defer f.Close()
	return readLabels(f, path)
}

// ParseLabels parses labels from r as ReadLabels does; name identifies r in errors.
func ParseLabels(r io.Reader, name string) ([]int, error) { return readLabels(r, name) }

// readLabels parses labels from r; name identifies r in errors.
func readLabels(r io.Reader, name string) ([]int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxLabelLine)
	var (
		raw      []string
		line     int
		firstGap int // line number of the first blank line, 0 if none yet
	)
	for sc.Scan() {
		line++
		s := sc.Text()
		if strings.HasPrefix(s, "\xff\xfe") || strings.HasPrefix(s, "\xfe\xff") || strings.IndexByte(s, 0) >= 0 {
			// PowerShell's Out-File writes UTF-16: a 0 byte beside each digit made
			// "0" on line 1 another label than "0" on line 3.
			return nil, fmt.Errorf("%s:%d: UTF-16 text or a binary file; save the labels as UTF-8 text (iconv -f UTF-16 -t UTF-8)", name, line)
		}
		if line == 1 {
			s = strings.TrimPrefix(s, "\ufeff") // byte order mark
		}
		s = strings.TrimSpace(s)
		if s == "" {
			if firstGap == 0 {
				firstGap = line
			}
			continue
		}
		if firstGap != 0 {
			return nil, fmt.Errorf("%s:%d: empty label", name, firstGap)
		}
		if strings.ContainsAny(s, ",\t") || numberFields(s) {
			// A CSV's every line would be a label of its own, and the scores nonsense.
			return nil, fmt.Errorf("%s:%d: %q is a row of columns, not a label: give one label a line (predict's assignments: the cluster column alone)", name, line, truncate(s, 40))
		}
		raw = append(raw, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%s: no labels", name)
	}
	return LabelColumn(raw), nil
}

// MissingLabel says whether a label s, trimmed, marks a point without a class: empty,
// or a missing value as pandas' read_csv takes one (R writes NA), but "None", which
// may name a class. Such a point is scored by no metric (ScoreLabelled).
func MissingLabel(s string) bool { return missingLabels[s] }

var missingLabels = map[string]bool{"": true, "NA": true, "N/A": true, "n/a": true, "#N/A": true, "#N/A N/A": true,
	"#NA": true, "<NA>": true, "NULL": true, "null": true, "NaN": true, "-NaN": true, "nan": true, "-nan": true,
	"1.#IND": true, "-1.#IND": true, "1.#QNAN": true, "-1.#QNAN": true}

// LabelColumn numbers labels as ReadLabels numbers a file's lines, each cell
// trimmed: the cells of a CSV column, which may hold commas (quoted in the file).
// A missing value (MissingLabel) is -1, a point without a class.
func LabelColumn(cells []string) []int {
	raw := make([]string, len(cells))
	allNumber := true
	for i, s := range cells {
		s = strings.TrimSpace(s)
		if MissingLabel(s) {
			raw[i] = s
			continue
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && f == math.Trunc(f) && f >= 0 && f < 1<<31 {
			// pandas writes an integer column with a missing value as floats:
			// "1.0" is the class "1" of the other file.
			s = strconv.Itoa(int(f))
		}
		if allNumber {
			if v, err := strconv.Atoi(s); err != nil || v < 0 {
				allNumber = false
			}
		}
		raw[i] = s
	}
	labels := make([]int, len(raw))
	if allNumber {
		for i, s := range raw {
			labels[i] = -1
			if !MissingLabel(s) {
				labels[i], _ = strconv.Atoi(s) // validated above
			}
		}
		return labels
	}
	ids := make(map[string]int)
	for i, s := range raw {
		if MissingLabel(s) {
			labels[i] = -1
			continue
		}
		id, ok := ids[s]
		if !ok {
			id = len(ids)
			ids[s] = id
		}
		labels[i] = id
	}
	return labels
}

// truncate is s cut to at most n bytes, at a character's start, with "…" where it
// was cut: half a character would be quoted as bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// numberFields says whether s is several numbers apart by spaces, as np.savetxt
// writes a row: "12 3" is a row, "ankle boot" may be a class's name.
func numberFields(s string) bool {
	f := strings.Fields(s)
	for _, x := range f {
		if _, err := strconv.ParseFloat(x, 64); err != nil {
			return false
		}
	}
	return len(f) > 1
}
