//go:build !race

package main

const raceOverhead = 0
