package tasks

import (
	"fmt"
	"strings"
)

// dataFamilies are data-analysis tasks over CSV and JSON files.
func dataFamilies() []Family {
	return []Family{
		{
			Domain:  "data",
			Name:    "csv_region_total",
			Kind:    KindNumber,
			Summary: "sum one region's sales in a CSV file",
			Build:   buildCSVRegionTotal,
		},
	}
}

func buildCSVRegionTotal(r *Rand, _ int) Built {
	regions := Sample(r, []string{"north", "south", "east", "west", "central", "coastal"}, 4)
	target := Pick(r, regions)
	var b strings.Builder
	b.WriteString("order_id,region,amount\n")
	total := 0
	for i := range r.Range(25, 40) {
		region := Pick(r, regions)
		cents := r.Range(100, 99999)
		if region == target {
			total += cents
		}
		fmt.Fprintf(&b, "%d,%s,%d.%02d\n", 1000+i, region, cents/100, cents%100)
	}
	return Built{
		Instruction: fmt.Sprintf("sales.csv lists orders. What is the total amount of the orders in the %q "+
			"region? Answer with the number (two decimals; within 0.01 counts).", target),
		Files: map[string]string{"sales.csv": b.String()},
		Key:   Key{Answer: fmt.Sprintf("%d.%02d", total/100, total%100), Tolerance: 0.01},
	}
}
