package eval

import (
	"math"
	"testing"
)

func TestMeanCI95(t *testing.T) {
	tests := []struct {
		name         string
		xs           []float64
		mean, margin float64
	}{
		// s² = 2.5 and t(0.975, 4) = 2.7764451051977987 (scipy 1.10.1).
		{"1..5", []float64{1, 2, 3, 4, 5}, 3, 2.7764451051977987 * math.Sqrt(2.5) / math.Sqrt(5)},
		// Reference values from scipy 1.10.1: t.ppf(0.975, n-1)*s/sqrt(n).
		{"scores", []float64{0.81, 0.79, 0.83, 0.80}, 0.8075, 0.027175308837964835},
		// Two runs: t(0.975, 1) = 12.706, a very wide interval, as it should be.
		{"two", []float64{2, 4}, 3, 12.706204736432094},
		{"constant", []float64{0.7, 0.7, 0.7}, 0.7, 0},
		{"one", []float64{0.42}, 0.42, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mean, margin := MeanCI95(tt.xs)
			if math.Abs(mean-tt.mean) > 1e-12 || math.Abs(margin-tt.margin) > 1e-9 {
				t.Errorf("MeanCI95(%v) = %v ± %v, want %v ± %v", tt.xs, mean, margin, tt.mean, tt.margin)
			}
		})
	}
	if mean, margin := MeanCI95(nil); !math.IsNaN(mean) || margin != 0 {
		t.Errorf("MeanCI95(nil) = %v ± %v, want NaN ± 0", mean, margin)
	}
}

func TestMeanStd(t *testing.T) {
	tests := []struct {
		name      string
		xs        []float64
		mean, std float64
	}{
		{"1..5", []float64{1, 2, 3, 4, 5}, 3, math.Sqrt(2.5)},
		{"scores", []float64{0.81, 0.79, 0.83, 0.80}, 0.8075, 0.017078251276599295}, // numpy std(ddof=1)
		{"one", []float64{7}, 7, 0},
		{"constant", []float64{0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1}, 0.1, 0},
		// Large offset, small spread: the naive sum-of-squares formula loses
		// every digit here.
		{"offset", []float64{1e9 + 1, 1e9 + 2, 1e9 + 3}, 1e9 + 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mean, std := MeanStd(tt.xs)
			if math.Abs(mean-tt.mean) > 1e-12*max(1, math.Abs(tt.mean)) || math.Abs(std-tt.std) > 1e-12 {
				t.Errorf("MeanStd(%v) = %v, %v, want %v, %v", tt.xs, mean, std, tt.mean, tt.std)
			}
		})
	}
	if mean, std := MeanStd(nil); !math.IsNaN(mean) || std != 0 {
		t.Errorf("MeanStd(nil) = %v, %v, want NaN, 0", mean, std)
	}
}
