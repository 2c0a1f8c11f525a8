package train

import (
	"fmt"
	"strings"
)

// An Objective is what a training step optimises. Run.step reads these facts and
// computes the objective's loss; adding one is a row in Objectives and its case there.
type Objective struct {
	Name string
	Help string
	// Augmented: the step also forwards T(x), a transformed copy of each image, so
	// the objective needs images.
	Augmented bool
	// KLStep: a second optimiser (lr-kl) takes Algorithm 1's KL consistency step.
	KLStep bool
	// Supervised: cross-entropy on the labels instead of a clustering loss.
	Supervised bool
	// ForwardEquivalents is the step's cost in forward passes (see StepFLOPs).
	ForwardEquivalents int
}

// Objectives are the training objectives.
var Objectives = []Objective{
	{Name: "em", Help: "the paper's EM on the data as given", ForwardEquivalents: 3},
	{Name: "em-aug", Help: "EM on images and transformed copies, without the KL step", Augmented: true, ForwardEquivalents: 6},
	{Name: "twofold", Help: "Algorithm 1: EM on images and transformed copies, then a KL consistency step", Augmented: true, KLStep: true, ForwardEquivalents: 10},
	{Name: "iic", Help: "IIC: mutual information of the clusters of an image and of its transformed copy", Augmented: true, ForwardEquivalents: 6},
	{Name: "supervised", Help: "cross-entropy on the labels (trains the §8.1 network whose 2-d bottleneck makes the 2-d data set)", Supervised: true, ForwardEquivalents: 3},
}

// LookupObjective returns the objective of that name.
func LookupObjective(name string) (Objective, error) {
	for _, o := range Objectives {
		if o.Name == name {
			return o, nil
		}
	}
	return Objective{}, fmt.Errorf("--objective %q: want one of %s", name, ObjectiveNames(nil))
}

// ObjectiveNames lists the names of the objectives keep accepts (all when nil),
// comma-separated.
func ObjectiveNames(keep func(Objective) bool) string {
	var names []string
	for _, o := range Objectives {
		if keep == nil || keep(o) {
			names = append(names, o.Name)
		}
	}
	return strings.Join(names, ", ")
}

// objective is the config's objective; the zero Objective when Validate would refuse it.
func (c *Config) objective() Objective {
	o, _ := LookupObjective(c.Objective)
	return o
}
