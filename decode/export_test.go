package decode

import "fmt"

// DisableAdoption keeps a pool's idle GPU decoders to their own videos (video.adopt), so that a
// test has decoders opened afresh to compare with.
func DisableAdoption(p *Pool) { p.noAdopt = true }

// SeeksRewound seeks to each keyframe of info's video but the first, in order, and returns those
// whose seek went back to the start of the file (video.seek).
func SeeksRewound(info *Info) ([]int, error) {
	v, err := openVideo(info, nil, newVideoState(info, nil), 1, nil, "")
	if err != nil {
		return nil, err
	}
	defer v.close()
	var rewound []int
	for kf := 1; kf < len(info.Keyframes); kf++ {
		back, err := v.seek(kf)
		if err != nil {
			return rewound, fmt.Errorf("keyframe %d: %w", kf, err)
		}
		if back {
			rewound = append(rewound, kf)
		}
	}
	return rewound, nil
}
