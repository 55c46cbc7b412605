package decode

// avcNALLength returns the size in bytes of the NAL unit lengths that prefix each NAL unit in the
// packets of an H.264 stream with this extradata: 1 to 4 for an avcC record (MP4, Matroska), 0
// for none, whose packets separate NAL units by start codes (MPEG-TS, AVI, raw).
func avcNALLength(extradata []byte) int {
	if len(extradata) >= 7 && extradata[0] == 1 {
		return int(extradata[4]&3) + 1
	}
	return 0
}

// startsIDR says whether an H.264 packet holds a slice of an IDR picture (NAL unit type 5),
// which resets every reference and the picture order count. nalLength is avcNALLength's; a
// packet that cannot be parsed so is not one.
func startsIDR(pkt []byte, nalLength int) bool {
	const idrSlice = 5
	if nalLength == 0 {
		// Start codes: 00 00 01 before each NAL unit (00 00 00 01 ends the same way).
		for i := 0; i+3 < len(pkt); i++ {
			if pkt[i] == 0 && pkt[i+1] == 0 && pkt[i+2] == 1 {
				if pkt[i+3]&0x1f == idrSlice {
					return true
				}
				i += 2
			}
		}
		return false
	}
	for i := 0; i+nalLength < len(pkt); {
		n := 0
		for _, b := range pkt[i : i+nalLength] {
			n = n<<8 | int(b)
		}
		i += nalLength
		if n <= 0 || n > len(pkt)-i {
			return false
		}
		if pkt[i]&0x1f == idrSlice {
			return true
		}
		i += n
	}
	return false
}
