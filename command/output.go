package command

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"emclust/atomicfile"
	"emclust/data"
	"emclust/train"
)

// writeAssignments writes index,cluster,posterior[,label] atomically, with the rows'
// IDs (--id-col), or an image folder's paths, in place of the index where the data
// have them. The label is the class's name as the data give it (src's Classes) where
// known, else its id; empty for a row without one.
func writeAssignments(path string, pred *train.Prediction, src train.Source) error {
	return writeClusters(path, nil, pred, src, false)
}

// writeClusters writes the assignments, or with all every cluster's posterior
// (p0..pK-1) instead of the winner's, to path, or to stdout where path is "-".
func writeClusters(path string, stdout io.Writer, pred *train.Prediction, src train.Source, all bool) error {
	labels, classes := labelsOf(src)
	var ids []string
	first := "index"
	if named, ok := src.(interface{ IDs() ([]string, string) }); ok {
		var name string
		if ids, name = named.IDs(); ids != nil {
			first = string(appendCSVField(nil, cmp.Or(name, "id")))
		}
	}
	return writeOut(path, stdout, func(w io.Writer) error {
		head := first + ",cluster,posterior"
		if all {
			head = first + ",cluster"
			for j := 0; j < pred.K; j++ {
				head += ",p" + strconv.Itoa(j)
			}
		}
		if labels != nil {
			head += ",label"
		}
		if _, err := fmt.Fprintln(w, head); err != nil {
			return err
		}
		buf := make([]byte, 0, 256)
		for i, c := range pred.Cluster {
			if ids != nil {
				buf = appendCSVField(buf[:0], ids[i])
			} else {
				buf = strconv.AppendInt(buf[:0], int64(i), 10)
			}
			buf = append(buf, ',')
			buf = strconv.AppendInt(buf, int64(c), 10)
			row := pred.Posterior[i*pred.K : (i+1)*pred.K]
			if !all {
				row = row[c : c+1]
			}
			for _, p := range row {
				buf = append(buf, ',')
				buf = strconv.AppendFloat(buf, float64(p), 'f', 6, 32)
			}
			if labels != nil {
				buf = appendLabel(append(buf, ','), labels[i], classes)
			}
			buf = append(buf, '\n')
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
}

// labelsOf returns src's labels (nil where it has none) and its classes' names, as
// the data give them (an image folder's class folders, a table's label cells), where
// known.
func labelsOf(src train.Source) (labels []int, classes []string) {
	labels = src.Labels()
	if c, ok := src.(interface{ Classes() []string }); ok && labels != nil {
		classes = c.Classes()
	}
	return labels, classes
}

// appendLabel appends label l as one CSV field: its class's name where classes has
// it, else its id, and nothing for a row without a class, as in the data.
func appendLabel(buf []byte, l int, classes []string) []byte {
	switch {
	case l == data.Unlabelled:
		return buf
	case l >= 0 && l < len(classes):
		return appendCSVField(buf, classes[l])
	default:
		return strconv.AppendInt(buf, int64(l), 10)
	}
}

// writeOut writes path atomically with fill, or, where path is "-" and stdout is
// given, to stdout (a pipe's reader sees the rows as they come).
func writeOut(path string, stdout io.Writer, fill func(io.Writer) error) error {
	if path != "-" || stdout == nil {
		return atomicfile.Write(path, fill)
	}
	bw := bufio.NewWriter(stdout)
	if err := fill(bw); err != nil {
		return err
	}
	return bw.Flush()
}

// outName names path for the log line that follows the write: "stdout" for "-".
func outName(path string) string {
	if path == "-" {
		return "stdout"
	}
	return path
}

// appendCSVField appends s as one CSV field, quoted where it holds a delimiter, a
// quote, a line break or surrounding blanks (RFC 4180).
func appendCSVField(buf []byte, s string) []byte {
	if !strings.ContainsAny(s, ",\"\r\n") && s == strings.TrimSpace(s) {
		return append(buf, s...)
	}
	buf = append(buf, '"')
	buf = append(buf, strings.ReplaceAll(s, `"`, `""`)...)
	return append(buf, '"')
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, append(b, '\n'))
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

// round4 rounds v, which may be negative, to four decimals.
func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }
